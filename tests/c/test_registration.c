/* Every registration function under the one rule for host capabilities (docs/c-api.md, "Host
 * capabilities"): the library owns the userdata from the call on, so its finalizer runs exactly
 * once, on failure too; an older, smaller struct is accepted (the members past its
 * `struct_size` read as NULL); a `struct_size` below the minimum is _INVALID_ARGUMENT, and the
 * finalizer still runs once. One section per registration function. An older struct lives in
 * a heap block of exactly its size, so the sanitizers catch a read past it. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static void count_free(void *ud) { atomic_fetch_add((atomic_int *)ud, 1); }

/* A heap copy of the first `size` bytes of `full`, with `struct_size` set to `size`: the
 * struct a host built with an older header would pass. */
static void *older(const void *full, size_t size) {
    void *p = malloc(size);
    memcpy(p, full, size);
    uint32_t s = (uint32_t)size;
    memcpy(p, &s, sizeof s); /* struct_size is the first member of every capability struct */
    return p;
}

#define END_OF(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))

static char *g_cfg;

/* The agent works after the registration: one scripted turn. */
static void one_turn(agentao_agent *a) {
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "hi", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "ok");
    agentao_string_free(text);
}

static agentao_agent *fresh_agent(void) { return tu_agent(g_cfg, NULL); }

/* `call` writes its error to the caller's `err`. */
#define EXPECT_INVALID(call, needle)                                            \
    do {                                                                        \
        agentao_status st_ = (call);                                            \
        CHECK_STATUS(st_, AGENTAO_STATUS_INVALID_ARGUMENT);                     \
        CHECK_CONTAINS(agentao_error_message(err), needle);                     \
        agentao_error_free(err);                                                \
        err = NULL;                                                             \
    } while (0)

/* ---- agentao_agent_new (agentao_transport) ----------------------------------------------- */

static void test_transport(void) {
    tu_section("agentao_agent_new: transport");
    atomic_int freed = 0;
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.userdata = &freed;
    t.userdata_free = count_free;
    agentao_agent *a = NULL;
    agentao_error *err = NULL;
    /* A failure (a config that does not parse). */
    CHECK_STATUS(agentao_agent_new("{", &t, &a, NULL), AGENTAO_STATUS_INVALID_JSON);
    CHECK(a == NULL && atomic_load(&freed) == 1);
    /* Below the minimum (the members up to userdata_free are still read, as documented). */
    t.struct_size = (uint32_t)offsetof(agentao_transport, userdata_free);
    EXPECT_INVALID(agentao_agent_new(g_cfg, &t, &a, &err), "agentao_transport.struct_size");
    CHECK(a == NULL && atomic_load(&freed) == 2);
    /* The oldest struct: up to userdata_free; every slot NULL (the null transport). */
    t.struct_size = sizeof t;
    void *old = older(&t, END_OF(agentao_transport, userdata_free));
    CHECK_STATUS(agentao_agent_new(g_cfg, old, &a, NULL), AGENTAO_STATUS_OK);
    free(old);
    if (a) {
        one_turn(a);
        CHECK(atomic_load(&freed) == 2);
        agentao_agent_free(a);
    }
    CHECK_MSG(atomic_load(&freed) == 3, "userdata_free ran %d times", atomic_load(&freed));
}

/* ---- agentao_agent_set_file_system ------------------------------------------------------- */

static void test_file_system(void) {
    tu_section("agentao_agent_set_file_system");
    atomic_int freed = 0;
    agentao_file_system fs;
    memset(&fs, 0, sizeof fs);
    fs.struct_size = sizeof fs;
    fs.userdata = &freed;
    fs.userdata_free = count_free;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_file_system(NULL, &fs, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 1);
    agentao_agent *a = fresh_agent();
    if (!a) return;
    fs.struct_size = 4;
    EXPECT_INVALID(agentao_agent_set_file_system(a, &fs, &err), "agentao_file_system.struct_size is 4");
    CHECK(atomic_load(&freed) == 2);
    fs.struct_size = sizeof fs;
    void *old = older(&fs, END_OF(agentao_file_system, userdata_free));
    CHECK_STATUS(agentao_agent_set_file_system(a, old, NULL), AGENTAO_STATUS_OK);
    free(old);
    one_turn(a);
    CHECK(atomic_load(&freed) == 2);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&freed) == 3, "userdata_free ran %d times", atomic_load(&freed));
}

/* ---- agentao_agent_set_shell_executor ---------------------------------------------------- */

static void never_run(void *ud, const agentao_shell_request *req, agentao_shell_run *run) {
    (void)ud, (void)req;
    agentao_shell_run_fail(run, "not in this test", NULL);
}

static void test_shell_executor(void) {
    tu_section("agentao_agent_set_shell_executor");
    atomic_int freed = 0;
    agentao_shell_executor sh;
    memset(&sh, 0, sizeof sh);
    sh.struct_size = sizeof sh;
    sh.userdata = &freed;
    sh.userdata_free = count_free;
    sh.run = never_run;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_shell_executor(NULL, &sh, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 1);
    agentao_agent *a = fresh_agent();
    if (!a) return;
    sh.struct_size = (uint32_t)offsetof(agentao_shell_executor, run);
    EXPECT_INVALID(agentao_agent_set_shell_executor(a, &sh, &err), "agentao_shell_executor.struct_size");
    CHECK(atomic_load(&freed) == 2);
    /* A NULL required slot: _NULL_ARGUMENT, released too. */
    sh.struct_size = sizeof sh;
    sh.run = NULL;
    CHECK_STATUS(agentao_agent_set_shell_executor(a, &sh, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "agentao_shell_executor.run is NULL");
    agentao_error_free(err);
    CHECK(atomic_load(&freed) == 3);
    /* An older struct without `run_background`: accepted, background runs refused. */
    sh.run = never_run;
    void *old = older(&sh, END_OF(agentao_shell_executor, run));
    CHECK_STATUS(agentao_agent_set_shell_executor(a, old, NULL), AGENTAO_STATUS_OK);
    free(old);
    one_turn(a);
    CHECK(atomic_load(&freed) == 3);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&freed) == 4, "userdata_free ran %d times", atomic_load(&freed));
}

/* ---- agentao_agent_set_memory_store ------------------------------------------------------ */

static void mem_upsert(void *ud, const char *record, agentao_memory_answer *answer) {
    (void)ud, (void)record, (void)answer;
}

static void mem_list(void *ud, const char *scope, agentao_memory_answer *answer) {
    (void)ud, (void)scope;
    agentao_memory_answer_json(answer, "[]", NULL);
}

static void test_memory_store(void) {
    tu_section("agentao_agent_set_memory_store");
    atomic_int freed = 0;
    agentao_memory_store m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.userdata = &freed;
    m.userdata_free = count_free;
    m.upsert = mem_upsert;
    m.list = mem_list;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_memory_store(NULL, &m, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 1);
    agentao_agent *a = fresh_agent();
    if (!a) return;
    m.struct_size = (uint32_t)offsetof(agentao_memory_store, list);
    EXPECT_INVALID(agentao_agent_set_memory_store(a, &m, &err), "agentao_memory_store.struct_size");
    CHECK(atomic_load(&freed) == 2);
    /* An older struct without `get` and `search`: accepted, both found through `list`. */
    m.struct_size = sizeof m;
    void *old = older(&m, END_OF(agentao_memory_store, list));
    CHECK_STATUS(agentao_agent_set_memory_store(a, old, NULL), AGENTAO_STATUS_OK);
    free(old);
    one_turn(a);
    CHECK(atomic_load(&freed) == 2);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&freed) == 3, "userdata_free ran %d times", atomic_load(&freed));
}

/* ---- agentao_agent_set_mcp_registry ------------------------------------------------------ */

static void test_mcp_registry(void) {
    tu_section("agentao_agent_set_mcp_registry");
    atomic_int freed = 0;
    agentao_mcp_registry r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.userdata = &freed;
    r.userdata_free = count_free;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_mcp_registry(NULL, &r, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 1);
    agentao_agent *a = fresh_agent();
    if (!a) return;
    r.struct_size = 4;
    EXPECT_INVALID(agentao_agent_set_mcp_registry(a, &r, &err), "agentao_mcp_registry.struct_size is 4");
    CHECK(atomic_load(&freed) == 2);
    r.struct_size = sizeof r;
    void *old = older(&r, END_OF(agentao_mcp_registry, userdata_free));
    CHECK_STATUS(agentao_agent_set_mcp_registry(a, old, NULL), AGENTAO_STATUS_OK);
    free(old);
    one_turn(a);
    agentao_agent_free(a);
    CHECK_MSG(tu_wait_count(&freed, 3, TU_BOUND_MS(5000)) && atomic_load(&freed) == 3,
              "userdata_free ran %d times", atomic_load(&freed));
}

/* ---- agentao_agent_set_compaction_controller --------------------------------------------- */

static void never_decide(void *ud, const agentao_compaction_request *req, agentao_reply *reply) {
    (void)ud, (void)req;
    agentao_reply_compaction_allow(reply, NULL);
}

/* A new capability: every version has `decide`, so the smallest struct is the whole one; a
 * newer, larger struct is read up to this library's members. */
static void test_compaction_controller(void) {
    tu_section("agentao_agent_set_compaction_controller");
    atomic_int freed = 0;
    agentao_compaction_controller c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.userdata = &freed;
    c.userdata_free = count_free;
    c.decide = never_decide;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_compaction_controller(NULL, &c, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 1);
    agentao_agent *a = fresh_agent();
    if (!a) return;
    c.struct_size = (uint32_t)offsetof(agentao_compaction_controller, decide);
    EXPECT_INVALID(agentao_agent_set_compaction_controller(a, &c, &err),
                   "agentao_compaction_controller.struct_size");
    CHECK(atomic_load(&freed) == 2);
    c.struct_size = sizeof c;
    c.decide = NULL;
    CHECK_STATUS(agentao_agent_set_compaction_controller(a, &c, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "decide");
    agentao_error_free(err);
    err = NULL;
    CHECK(atomic_load(&freed) == 3);
    c.decide = never_decide;
    /* A newer header's struct: two more pointers, zeroed. */
    size_t newer_size = sizeof c + 2 * sizeof(void *);
    unsigned char *newer = calloc(1, newer_size);
    memcpy(newer, &c, sizeof c);
    uint32_t ns = (uint32_t)newer_size;
    memcpy(newer, &ns, sizeof ns);
    CHECK_STATUS(agentao_agent_set_compaction_controller(a, (void *)newer, NULL), AGENTAO_STATUS_OK);
    free(newer);
    /* The exact struct in a block of its own size replaces it: the first is released. */
    void *exact = older(&c, sizeof c);
    CHECK_STATUS(agentao_agent_set_compaction_controller(a, exact, NULL), AGENTAO_STATUS_OK);
    free(exact);
    CHECK(atomic_load(&freed) == 4);
    one_turn(a);
    CHECK(atomic_load(&freed) == 4);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&freed) == 5, "userdata_free ran %d times", atomic_load(&freed));
}

/* ---- agentao_agent_set_hooks ------------------------------------------------------------- */

static void silent_hook(void *ud, const agentao_hook_request *req, agentao_reply *reply) {
    (void)ud, (void)req;
    agentao_reply_hook(reply, NULL, NULL);
}

/* A new capability: every version has `on_hook`, so the smallest struct is the whole one; a
 * newer, larger struct is read up to this library's members. */
static void test_hooks(void) {
    tu_section("agentao_agent_set_hooks");
    atomic_int freed = 0;
    agentao_hooks h;
    memset(&h, 0, sizeof h);
    h.struct_size = sizeof h;
    h.userdata = &freed;
    h.userdata_free = count_free;
    h.on_hook = silent_hook;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_hooks(NULL, &h, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 1);
    agentao_agent *a = fresh_agent();
    if (!a) return;
    h.struct_size = (uint32_t)offsetof(agentao_hooks, on_hook);
    EXPECT_INVALID(agentao_agent_set_hooks(a, &h, &err), "agentao_hooks.struct_size");
    CHECK(atomic_load(&freed) == 2);
    h.struct_size = sizeof h;
    h.on_hook = NULL;
    CHECK_STATUS(agentao_agent_set_hooks(a, &h, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "on_hook");
    agentao_error_free(err);
    err = NULL;
    CHECK(atomic_load(&freed) == 3);
    h.on_hook = silent_hook;
    /* A newer header's struct: two more pointers, zeroed. */
    size_t newer_size = sizeof h + 2 * sizeof(void *);
    unsigned char *newer = calloc(1, newer_size);
    memcpy(newer, &h, sizeof h);
    uint32_t ns = (uint32_t)newer_size;
    memcpy(newer, &ns, sizeof ns);
    CHECK_STATUS(agentao_agent_set_hooks(a, (void *)newer, NULL), AGENTAO_STATUS_OK);
    free(newer);
    /* The exact struct in a block of its own size replaces it: the first is released. */
    void *exact = older(&h, sizeof h);
    CHECK_STATUS(agentao_agent_set_hooks(a, exact, NULL), AGENTAO_STATUS_OK);
    free(exact);
    CHECK(atomic_load(&freed) == 4);
    one_turn(a);
    CHECK(atomic_load(&freed) == 4);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&freed) == 5, "userdata_free ran %d times", atomic_load(&freed));
}

/* ---- agentao_agent_add_tool -------------------------------------------------------------- */

static void tool_execute(void *ud, const char *args, const agentao_tool_call *call, agentao_reply *reply) {
    (void)ud, (void)args, (void)call;
    agentao_reply_tool_result(reply, "done", NULL);
}

static void test_add_tool(void) {
    tu_section("agentao_agent_add_tool");
    atomic_int freed = 0;
    agentao_tool_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.name = "probe";
    d.description = "a probe";
    d.parameters_json = "{\"type\":\"object\",\"properties\":{}}";
    d.userdata = &freed;
    d.userdata_free = count_free;
    d.execute = tool_execute;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_add_tool(NULL, &d, false, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 1);
    agentao_agent *a = fresh_agent();
    if (!a) return;
    /* `execute` is in every version of the struct: a size that ends before it is refused. */
    d.struct_size = (uint32_t)offsetof(agentao_tool_desc, execute);
    EXPECT_INVALID(agentao_agent_add_tool(a, &d, false, &err), "agentao_tool_desc.struct_size");
    CHECK(atomic_load(&freed) == 2);
    /* A validation failure after the size check releases it too. */
    d.struct_size = sizeof d;
    d.name = "";
    CHECK_STATUS(agentao_agent_add_tool(a, &d, false, NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK(atomic_load(&freed) == 3);
    d.name = "probe";
    /* The minimum is the whole struct today, so the oldest struct is this one; a newer, larger
     * one (members appended, zero here) is read up to this header's members. */
    size_t newer_size = sizeof d + 2 * sizeof(void *);
    unsigned char *newer = calloc(1, newer_size);
    memcpy(newer, &d, sizeof d);
    uint32_t ns = (uint32_t)newer_size;
    memcpy(newer, &ns, sizeof ns);
    CHECK_STATUS(agentao_agent_add_tool(a, (const agentao_tool_desc *)newer, false, NULL), AGENTAO_STATUS_OK);
    free(newer);
    void *old = older(&d, END_OF(agentao_tool_desc, execute));
    CHECK_STATUS(agentao_agent_add_tool(a, old, true, NULL), AGENTAO_STATUS_OK);
    free(old);
    one_turn(a);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&freed) == 5, "userdata_free ran %d times", atomic_load(&freed));
}

/* ---- agentao_agent_add_host_event_observer ---------------------------------------------- */

static void observe(void *ud, const char *json) { (void)ud, (void)json; }

static void test_observer(void) {
    tu_section("agentao_agent_add_host_event_observer");
    atomic_int freed = 0;
    uint64_t id = 0;
    agentao_agent *a = fresh_agent();
    if (!a) return;
    CHECK_STATUS(agentao_agent_add_host_event_observer(NULL, observe, &freed, count_free, &id, NULL),
                 AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, NULL, &freed, count_free, &id, NULL),
                 AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, observe, &freed, count_free, NULL, NULL),
                 AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_MSG(atomic_load(&freed) == 3, "userdata_free ran %d times", atomic_load(&freed));
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, observe, &freed, count_free, &id, NULL),
                 AGENTAO_STATUS_OK);
    one_turn(a);
    CHECK(agentao_agent_remove_host_event_observer(a, id));
    CHECK(atomic_load(&freed) == 4);
    agentao_agent_free(a);
    CHECK(atomic_load(&freed) == 4);
}

/* ---- agentao_broadcaster_subscribe_with_free -------------------------------------------- */

static void test_broadcaster(void) {
    tu_section("agentao_broadcaster_subscribe_with_free");
    atomic_int freed = 0;
    uint64_t id = 0;
    agentao_broadcaster *b = agentao_broadcaster_new();
    CHECK_STATUS(agentao_broadcaster_subscribe_with_free(NULL, observe, &freed, count_free, &id, NULL),
                 AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_broadcaster_subscribe_with_free(b, NULL, &freed, count_free, &id, NULL),
                 AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_broadcaster_subscribe_with_free(b, observe, &freed, count_free, NULL, NULL),
                 AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&freed) == 3);
    CHECK_STATUS(agentao_broadcaster_subscribe_with_free(b, observe, &freed, count_free, &id, NULL),
                 AGENTAO_STATUS_OK);
    agentao_broadcaster_free(b);
    CHECK(atomic_load(&freed) == 4);
}

int main(void) {
    g_cfg = tu_config(tu_workspace(), "{\"text\":\"ok\"},{\"text\":\"ok\"}", NULL);
    test_transport();
    test_file_system();
    test_shell_executor();
    test_memory_store();
    test_mcp_registry();
    test_compaction_controller();
    test_hooks();
    test_add_tool();
    test_observer();
    test_broadcaster();
    free(g_cfg);
    return tu_finish("test_registration");
}
