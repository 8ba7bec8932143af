/* Sub-agents through the C API (spec §6): agentao_agent_add_subagent and its errors, a child
 * run with its forwarded events, labelled confirmation, lifecycle events with the usage
 * already rolled up into agentao_agent_usage, narrowing, parent cancel during a child turn,
 * and freeing the agent while a child runs. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* A config whose sub-agents are scripted by name (llm.script.subagents). */
static char *config(const char *dir, const char *section, const char *parent, const char *subs) {
    return tu_printf("{\"working_directory\":\"%s\",\"subagents\":%s,\"llm\":{\"provider\":"
                     "\"scripted\",\"script\":{\"responses\":[%s],\"subagents\":{%s}}}}",
                     dir, section, parent, subs);
}

/* Host events as they arrive, with the parent's prompt-token total read at each. */
struct observed {
    pthread_mutex_t mu;
    agentao_agent *agent;
    char *lifecycle[8];
    long prompt_at[8];
    int n;
};

static long prompt_tokens(agentao_agent *a) {
    char *usage = NULL;
    long n = -1;
    if (agentao_agent_usage(a, &usage, NULL) == AGENTAO_STATUS_OK) {
        const char *p = strstr(usage, "\"prompt_tokens\":");
        if (p) n = strtol(p + 16, NULL, 10);
    }
    agentao_string_free(usage);
    return n;
}

static void observe(void *userdata, const char *event_json) {
    struct observed *o = userdata;
    if (!strstr(event_json, "\"event_type\":\"subagent_lifecycle\"")) return;
    pthread_mutex_lock(&o->mu);
    if (o->n < 8) {
        o->lifecycle[o->n] = strdup(event_json);
        o->prompt_at[o->n] = prompt_tokens(o->agent);
        o->n++;
    }
    pthread_mutex_unlock(&o->mu);
}

static void observed_free(struct observed *o) {
    for (int i = 0; i < o->n; i++) free(o->lifecycle[i]);
}

static atomic_int agent_starts;

static void count_agent_start(tu_recorder *rec, const char *event_json) {
    (void)rec;
    if (strstr(event_json, "\"type\":\"agent_start\"")) atomic_fetch_add(&agent_starts, 1);
}

static void test_add_subagent_errors(void) {
    tu_section("agentao_agent_add_subagent: statuses");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"hi\"}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_add_subagent(NULL, "{\"name\":\"x\"}", NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_add_subagent(a, NULL, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":", NULL), AGENTAO_STATUS_INVALID_JSON);
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"a b\"}", &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "a b");
    agentao_error_free(err);
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"x\",\"max_turns\":0}", NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"x\",\"bogus\":1}", NULL), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"\xff\"}", NULL), AGENTAO_STATUS_INVALID_UTF8);
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"x\",\"description\":\"d\"}", NULL), AGENTAO_STATUS_OK);
    agentao_agent_free(a);
}

static void test_busy_during_a_turn(void) {
    tu_section("agentao_agent_add_subagent during a turn: TURN_IN_PROGRESS");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir,
                          "{\"tool_calls\":[{\"id\":\"w\",\"name\":\"write_file\",\"arguments\":"
                          "{\"file_path\":\"f.txt\",\"content\":\"x\"}}]},{\"text\":\"done\"}",
                          NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.confirm_mode = TU_CONFIRM_DEFER;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "go", -1, NULL, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&rec.confirms, 1, 10000));
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"x\"}", NULL), AGENTAO_STATUS_TURN_IN_PROGRESS);
    CHECK_STATUS(tu_answer_confirm(&rec, AGENTAO_CONFIRMATION_ALLOW, 5000), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&d.calls, 1, 10000));
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"x\"}", NULL), AGENTAO_STATUS_OK);
    agentao_agent_free(a);
    tu_done_destroy(&d);
out:
    tu_recorder_destroy(&rec);
}

static void test_a_child_run(void) {
    tu_section("a child run: forwarded events, labelled confirmation, lifecycle, usage");
    const char *dir = tu_workspace();
    const char *parent =
        "{\"tool_calls\":[{\"id\":\"call_1\",\"name\":\"agent_helper\",\"arguments\":{\"task\":\"write it\"}}],"
        "\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":1}},"
        "{\"text\":\"all done\",\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":1}}";
    const char *subs =
        "\"helper\":["
        "{\"tool_calls\":[{\"id\":\"k1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"out.txt\",\"content\":\"hello\"}}],"
        " \"usage\":{\"prompt_tokens\":100,\"completion_tokens\":5}},"
        "{\"tool_calls\":[{\"id\":\"k2\",\"name\":\"host_only\",\"arguments\":{}}],"
        " \"usage\":{\"prompt_tokens\":200,\"completion_tokens\":5}},"
        "{\"tool_calls\":[{\"id\":\"k3\",\"name\":\"complete_task\",\"arguments\":{\"result\":\"wrote out.txt\"}}],"
        " \"usage\":{\"prompt_tokens\":300,\"completion_tokens\":5}},"
        "{\"text\":\"\"}]";
    char *cfg = config(dir, "{\"definitions\":[]}", parent, subs);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    CHECK_STATUS(agentao_agent_add_subagent(a, "{\"name\":\"helper\",\"description\":\"Writes files.\",\"max_turns\":4}", NULL),
                 AGENTAO_STATUS_OK);
    struct observed o = {.mu = PTHREAD_MUTEX_INITIALIZER, .agent = a};
    uint64_t obs_id = 0;
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, observe, &o, NULL, &obs_id, NULL), AGENTAO_STATUS_OK);
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "please", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "all done");
    agentao_string_free(text);

    /* The child's confirmation reached this host, prefixed with its name. */
    CHECK_STR_EQ(rec.last_confirm_tool, "[helper] write_file");
    char *out_path = tu_printf("%s/out.txt", dir);
    char *written = tu_read_file(out_path);
    CHECK_STR_EQ(written, "hello");
    free(written);
    free(out_path);

    /* Forwarded events carry the run's id and the label. */
    char *start = tu_recorder_find(&rec, "agent_start", 0);
    CHECK_CONTAINS(start, "\"agent\":\"helper\",\"task\":\"write it\",\"max_turns\":4");
    char *ctid = tu_json_str(start, "child_task_id");
    CHECK(ctid && strlen(ctid) == 36);
    char *ts = tu_recorder_find(&rec, "tool_start", 1); /* 0 is the parent's agent_helper */
    CHECK_CONTAINS(ts, TU_KV("tool", "[helper 1/4] write_file"));
    CHECK_CONTAINS(ts, ctid);
    char *conf = tu_recorder_find(&rec, "tool_confirmation", 0);
    CHECK_CONTAINS(conf, TU_KV("tool", "[helper 1/4] write_file"));
    /* host_only is not copied to sub-agents: the child's call to it never started. */
    char *ts2 = tu_recorder_find(&rec, "tool_start", 2);
    CHECK_CONTAINS(ts2, TU_KV("tool", "[helper 3/4] complete_task"));
    char *end = tu_recorder_find(&rec, "agent_end", 0);
    CHECK_CONTAINS(end, TU_KV("state", "completed"));
    CHECK_CONTAINS(end, "\"turns\":4,\"tool_calls\":3");
    /* Every forwarded kind carries the run's id; the child's text and turn end do not arrive. */
    const char *kinds[] = {"turn_start", "tool_complete"};
    for (int k = 0; k < 2; k++) {
        char *ev = tu_recorder_find(&rec, kinds[k], 0);
        if (ev && !strstr(ev, ctid)) { free(ev); ev = tu_recorder_find(&rec, kinds[k], 1); }
        CHECK_CONTAINS(ev, ctid);
        free(ev);
    }
    char *tc = tu_recorder_find(&rec, "tool_complete", 0);
    CHECK_CONTAINS(tc, TU_KV("tool", "write_file"));
    free(tc);
    char *second_end = tu_recorder_find(&rec, "turn_end", 1);
    CHECK_MSG(second_end == NULL, "a child's turn_end reached the parent: %s", second_end);
    free(second_end);

    /* The parent's tool result: the payload and the footer. */
    char *history = tu_history(a);
    CHECK_CONTAINS(history, "wrote out.txt\\n\\n[helper: 4 turns, 3 tool calls, ~");

    /* Lifecycle: spawned, then completed with usage already in the parent's totals. */
    CHECK(o.n == 2);
    if (o.n == 2) {
        CHECK_CONTAINS(o.lifecycle[0], TU_KV("phase", "spawned"));
        CHECK_CONTAINS(o.lifecycle[0], TU_KV("parent_tool_call_id", "call_1"));
        CHECK_CONTAINS(o.lifecycle[0], TU_KV("task_summary", "sub-agent: helper"));
        CHECK_CONTAINS(o.lifecycle[0], ctid);
        CHECK_CONTAINS(o.lifecycle[1], TU_KV("phase", "completed"));
        CHECK_CONTAINS(o.lifecycle[1], "\"usage\":{\"prompt_tokens\":600,\"completion_tokens\":15,");
        CHECK_MSG(o.prompt_at[1] == 10 + 600, "parent prompt tokens at the terminal event: %ld", o.prompt_at[1]);
    }
    CHECK(prompt_tokens(a) == 10 + 20 + 600);
    free(start);
    free(ctid);
    free(ts);
    free(ts2);
    free(conf);
    free(end);
    free(history);
    agentao_agent_free(a);
    observed_free(&o);
out:
    tu_recorder_destroy(&rec);
}

/* A host tool without copies_to_subagents, for the narrowing check above. */
static void never(void *userdata, const char *args_json, const agentao_tool_call *call, agentao_reply *reply) {
    (void)userdata; (void)args_json; (void)call;
    agentao_reply_tool_result(reply, "host ran", NULL);
}

static void test_narrowing_with_a_host_tool(void) {
    tu_section("a host tool without copies_to_subagents is left out of the child");
    const char *dir = tu_workspace();
    const char *parent =
        "{\"tool_calls\":[{\"id\":\"c\",\"name\":\"agent_n\",\"arguments\":{\"task\":\"t\"}}]},{\"text\":\"ok\"}";
    const char *subs =
        "\"n\":[{\"tool_calls\":[{\"id\":\"h1\",\"name\":\"host_kept\",\"arguments\":{}},"
        "{\"id\":\"h2\",\"name\":\"host_copied\",\"arguments\":{}}]},{\"text\":\"done\"}]";
    char *cfg = config(dir, "{\"definitions\":[{\"name\":\"n\"}]}", parent, subs);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    for (int copies = 0; copies < 2; copies++) {
        agentao_tool_desc d = {
            .struct_size = sizeof d,
            .name = copies ? "host_copied" : "host_kept",
            .description = "host",
            .parameters_json = "{\"type\":\"object\",\"properties\":{}}",
            .is_read_only = true,
            .copies_to_subagents = copies,
            .execute = never,
        };
        CHECK_STATUS(agentao_agent_add_tool(a, &d, false, NULL), AGENTAO_STATUS_OK);
    }
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(text);
    char *ts = tu_recorder_find(&rec, "tool_start", 1);
    CHECK_CONTAINS(ts, TU_KV("tool", "[n 1/15] host_copied"));
    char *none = tu_recorder_find(&rec, "tool_start", 2);
    CHECK_MSG(none == NULL, "host_kept ran in the child: %s", none);
    free(ts);
    free(none);
    agentao_agent_free(a);
out:
    tu_recorder_destroy(&rec);
}

struct canceller {
    agentao_cancel_token *tok;
    uint64_t at_ms;
};

static void *cancel_when_child_runs(void *arg) {
    struct canceller *c = arg;
    tu_wait_count(&agent_starts, 1, 10000);
    tu_sleep_ms(50);
    c->at_ms = tu_now_ms();
    agentao_cancel_token_cancel(c->tok, "user-cancel");
    return NULL;
}

static void test_parent_cancel_during_a_child(void) {
    tu_section("cancelling the parent turn cancels the running child");
    const char *dir = tu_workspace();
    const char *parent =
        "{\"tool_calls\":[{\"id\":\"c\",\"name\":\"agent_slow\",\"arguments\":{\"task\":\"t\"}}]},{\"text\":\"never\"}";
    const char *subs = "\"slow\":[{\"fault\":{\"type\":\"stall\",\"ms\":30000},\"text\":\"late\"}]";
    char *cfg = config(dir, "{\"definitions\":[{\"name\":\"slow\"}]}", parent, subs);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.on_event = count_agent_start;
    atomic_store(&agent_starts, 0);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    struct observed o = {.mu = PTHREAD_MUTEX_INITIALIZER, .agent = a};
    uint64_t obs_id = 0;
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, observe, &o, NULL, &obs_id, NULL), AGENTAO_STATUS_OK);
    struct canceller c = {agentao_cancel_token_new(), 0};
    pthread_t th;
    pthread_create(&th, NULL, cancel_when_child_runs, &c);
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "go", -1, c.tok, &text, NULL), AGENTAO_STATUS_CANCELLED);
    uint64_t returned = tu_now_ms();
    pthread_join(th, NULL);
    printf("parent cancel -> chat returned with a child running: %llu ms\n",
           (unsigned long long)(returned - c.at_ms));
    /* The contract is 100 ms; the margin is for a loaded 2-core machine (and valgrind). */
    CHECK_MSG(returned - c.at_ms < TU_BOUND_MS(2000), "chat returned %llu ms after the cancel",
              (unsigned long long)(returned - c.at_ms));
    char *end = tu_recorder_find(&rec, "agent_end", 0);
    CHECK_CONTAINS(end, TU_KV("state", "cancelled"));
    CHECK(o.n == 2);
    if (o.n == 2) {
        CHECK_CONTAINS(o.lifecycle[1], TU_KV("phase", "cancelled"));
        CHECK_CONTAINS(o.lifecycle[1], "\"error_type\":null");
    }
    free(end);
    agentao_cancel_token_free(c.tok);
    agentao_agent_free(a);
    observed_free(&o);
out:
    tu_recorder_destroy(&rec);
}

static void test_free_during_a_child(void) {
    tu_section("freeing the agent while a child runs");
    const char *dir = tu_workspace();
    const char *parent =
        "{\"tool_calls\":[{\"id\":\"c\",\"name\":\"agent_slow\",\"arguments\":{\"task\":\"t\"}}]},{\"text\":\"never\"}";
    const char *subs = "\"slow\":[{\"fault\":{\"type\":\"stall\",\"ms\":30000},\"text\":\"late\"}]";
    char *cfg = config(dir, "{\"definitions\":[{\"name\":\"slow\"}]}", parent, subs);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.on_event = count_agent_start;
    atomic_store(&agent_starts, 0);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "go", -1, NULL, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&agent_starts, 1, 10000));
    agentao_agent_free(a);
    CHECK(tu_wait_count(&d.calls, 1, 10000));
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
    tu_done_destroy(&d);
out:
    tu_recorder_destroy(&rec);
}

static void test_failed_and_parallel(void) {
    tu_section("a failed run (budget) and two sub-agents in one read-only batch");
    const char *dir = tu_workspace();
    const char *parent =
        "{\"tool_calls\":[{\"id\":\"p1\",\"name\":\"agent_loop\",\"arguments\":{\"task\":\"t\"}},"
        "{\"id\":\"p2\",\"name\":\"agent_quick\",\"arguments\":{\"task\":\"t\"}}]},{\"text\":\"ok\"}";
    const char *subs =
        "\"loop\":[{\"repeat\":2,\"delay_ms\":100,\"tool_calls\":[{\"id\":\"g{i}\",\"name\":\"glob\",\"arguments\":{\"pattern\":\"{i}*\"}}]}],"
        "\"quick\":[{\"text\":\"quick answer\",\"delay_ms\":100}]";
    char *cfg = config(dir, "{\"definitions\":[{\"name\":\"loop\",\"max_turns\":2},{\"name\":\"quick\"}]}", parent, subs);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    struct observed o = {.mu = PTHREAD_MUTEX_INITIALIZER, .agent = a};
    uint64_t obs_id = 0;
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, observe, &o, NULL, &obs_id, NULL), AGENTAO_STATUS_OK);
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "ok");
    agentao_string_free(text);
    CHECK(o.n == 4);
    if (o.n == 4) {
        /* Both spawned before either ended: they ran at the same time. */
        CHECK_CONTAINS(o.lifecycle[0], TU_KV("phase", "spawned"));
        CHECK_CONTAINS(o.lifecycle[1], TU_KV("phase", "spawned"));
        for (int i = 2; i < 4; i++) {
            if (strstr(o.lifecycle[i], "sub-agent: loop")) {
                CHECK_CONTAINS(o.lifecycle[i], TU_KV("phase", "failed"));
                CHECK_CONTAINS(o.lifecycle[i], TU_KV("error_type", "incomplete:max_iterations"));
            } else {
                CHECK_CONTAINS(o.lifecycle[i], TU_KV("phase", "completed"));
            }
        }
    }
    char *history = tu_history(a);
    CHECK_CONTAINS(history, "[loop did not finish: it used its entire 2-turn budget without finishing]");
    CHECK_CONTAINS(history, "quick answer\\n\\n[quick: 1 turns, 0 tool calls, ~");
    free(history);
    agentao_agent_free(a);
    observed_free(&o);
out:
    tu_recorder_destroy(&rec);
}

int main(void) {
    test_add_subagent_errors();
    test_busy_during_a_turn();
    test_a_child_run();
    test_narrowing_with_a_host_tool();
    test_failed_and_parallel();
    test_parent_cancel_during_a_child();
    test_free_during_a_child();
    return tu_finish("test_subagents");
}
