/* agentao_agent_run_handoff: a turn whose on_done runs inline where the turn ended (for a host
 * completion that only hands the result over). It fires exactly once with the outcome, on a
 * library thread, after turn_end; a blocking call inside it is refused with REENTRANT (never a
 * deadlock); a refused call (bad arguments, a turn in progress) never fires it; freeing the
 * agent while the turn runs still fires it once, cancelled, and the transport's userdata_free
 * runs once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

struct handoff {
    tu_done done;         /* the outcome, the status and the count, as tu_on_done records them */
    agentao_agent *agent; /* for the nested call */
    pthread_t caller;
    atomic_int on_caller_thread;
    atomic_int nested_chat;
};

static void handoff_done(void *ud, agentao_status status, const char *outcome, const agentao_error *err) {
    struct handoff *h = ud;
    atomic_store(&h->on_caller_thread, pthread_equal(pthread_self(), h->caller) ? 1 : 0);
    if (h->agent) {
        /* Forbidden by the contract, and refused, not deadlocked, when a host does it anyway. */
        char *text = NULL;
        agentao_error *nested = NULL;
        atomic_store(&h->nested_chat, (int)agentao_agent_chat(h->agent, "nested", -1, NULL, &text, &nested));
        agentao_string_free(text);
        agentao_error_free(nested);
    }
    tu_on_done(&h->done, status, outcome, err);
}

static void handoff_init(struct handoff *h) {
    memset(h, 0, sizeof *h);
    tu_done_init(&h->done);
    h->caller = pthread_self();
}

static void test_completion_once(void) {
    tu_section("agentao_agent_run_handoff: completion exactly once, with the outcome, on a library thread");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"handed over\",\"chunk_size\":3}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        struct handoff h;
        handoff_init(&h);
        h.agent = a;
        agentao_error *err = TU_JUNK;
        uint64_t t0 = tu_now_ms();
        CHECK_STATUS(agentao_agent_run_handoff(a, "hi", NULL, 0, -1, NULL, handoff_done, &h, &err),
                     AGENTAO_STATUS_OK);
        CHECK(err == NULL);
        CHECK(tu_wait_count(&h.done.calls, 1, 10000));
        CHECK_MSG(tu_now_ms() - t0 < TU_BOUND_MS(2500), "the nested call blocked");
        tu_sleep_ms(200);
        CHECK_MSG(atomic_load(&h.done.calls) == 1, "completion fired %d times", atomic_load(&h.done.calls));
        CHECK_STATUS(atomic_load(&h.done.status), AGENTAO_STATUS_OK);
        CHECK(h.done.message == NULL);
        CHECK(atomic_load(&h.on_caller_thread) == 0);
        CHECK_STATUS(atomic_load(&h.nested_chat), AGENTAO_STATUS_REENTRANT);
        CHECK_CONTAINS(h.done.outcome, TU_KV("type", "turn_outcome"));
        CHECK_CONTAINS(h.done.outcome, TU_KV("text", "handed over"));
        CHECK_CONTAINS(h.done.outcome, TU_KV("status", "ok"));
        /* turn_end was emitted before the completion, and last_turn is the same outcome. */
        char *ev = tu_recorder_find(&rec, "turn_end", 0);
        CHECK(ev != NULL);
        free(ev);
        char *last = tu_last_turn(a);
        CHECK_STR_EQ(last, h.done.outcome);
        free(last);
        tu_done_destroy(&h.done);
        agentao_agent_free(a);
    }
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
    tu_recorder_destroy(&rec);
}

static void test_refused(void) {
    tu_section("agentao_agent_run_handoff: a refused call says why and never fires on_done");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"slow\",\"delay_ms\":300}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    struct handoff h;
    handoff_init(&h);
    CHECK_FAILS_WITH(agentao_agent_run_handoff(NULL, "hi", NULL, 0, -1, NULL, tu_never_done, NULL, &err),
                AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_run_handoff(a, NULL, NULL, 0, -1, NULL, tu_never_done, NULL, &err),
                AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_run_handoff(a, "hi", NULL, 0, -1, NULL, NULL, NULL, &err),
                AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_run_handoff(a, "hi", NULL, 1, -1, NULL, tu_never_done, NULL, &err),
                AGENTAO_STATUS_NULL_ARGUMENT);
    static const unsigned char bytes[] = {1, 2, 3};
    agentao_image bad = {"text/plain", bytes, sizeof bytes};
    CHECK_FAILS_WITH(agentao_agent_run_handoff(a, "hi", &bad, 1, -1, NULL, tu_never_done, NULL, &err),
                AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_FAILS_WITH(agentao_agent_run_handoff(a, "\xff\xfe", NULL, 0, -1, NULL, tu_never_done, NULL, &err),
                AGENTAO_STATUS_INVALID_UTF8);
    /* None of them started a turn. */
    char *last = tu_last_turn(a);
    CHECK_STR_EQ(last, "null");
    free(last);
    /* A second turn while one runs. */
    CHECK_STATUS(agentao_agent_run_handoff(a, "first", NULL, 0, -1, NULL, handoff_done, &h, NULL),
                 AGENTAO_STATUS_OK);
    CHECK_FAILS_WITH(agentao_agent_run_handoff(a, "second", NULL, 0, -1, NULL, tu_never_done, NULL, &err),
                AGENTAO_STATUS_TURN_IN_PROGRESS);
    CHECK(tu_wait_count(&h.done.calls, 1, 10000));
    CHECK_STATUS(atomic_load(&h.done.status), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(h.done.outcome, TU_KV("text", "slow"));
    tu_sleep_ms(100);
    CHECK(atomic_load(&h.done.calls) == 1);
    tu_done_destroy(&h.done);
    agentao_agent_free(a);
}

static void test_free_while_running(void) {
    tu_section("agentao_agent_run_handoff: agentao_agent_free while the turn streams");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"a long slow answer\",\"chunk_size\":1,\"delay_ms\":50}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        struct handoff h;
        handoff_init(&h);
        CHECK_STATUS(agentao_agent_run_handoff(a, "talk", NULL, 0, -1, NULL, handoff_done, &h, NULL),
                     AGENTAO_STATUS_OK);
        tu_sleep_ms(150);
        uint64_t t0 = tu_now_ms();
        agentao_agent_free(a); /* does not wait */
        CHECK_MSG(tu_now_ms() - t0 < TU_BOUND_MS(200), "agentao_agent_free waited for the turn");
        CHECK(tu_wait_count(&h.done.calls, 1, 5000));
        CHECK(tu_wait_count(&rec.freed, 1, 5000));
        tu_sleep_ms(100);
        CHECK(atomic_load(&h.done.calls) == 1);
        CHECK(atomic_load(&rec.freed) == 1);
        CHECK_STATUS(atomic_load(&h.done.status), AGENTAO_STATUS_CANCELLED);
        CHECK_CONTAINS(h.done.outcome, TU_KV("status", "cancelled"));
        CHECK_CONTAINS(h.done.outcome, TU_KV("error", "session-closed"));
        tu_done_destroy(&h.done);
    }
    tu_recorder_destroy(&rec);
}

int main(void) {
    test_completion_once();
    test_refused();
    test_free_while_running();
    return tu_finish("test_run_handoff");
}
