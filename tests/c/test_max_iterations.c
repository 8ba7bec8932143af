/* on_max_iterations: stop (incomplete_reason max_iterations), continue (a whole new budget),
 * new_instruction (the message is appended to history), and an unknown action (stops). */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* Five tool-call responses with distinct arguments (no loop guard trips), then text. */
static const char *LOOP =
    "{\"repeat\":5,\"text\":\"step {i}\",\"tool_calls\":[{\"id\":\"l{i}\",\"name\":\"list_directory\",\"arguments\":{\"directory_path\":\"./d{i}\"}}]},"
    "{\"text\":\"final answer\"}";

struct run {
    char *text;
    char *last;
    char *history;
    int max_iters;
    uint32_t count;
    char *pending;
    agentao_status status;
};

static struct run run_with(const char *answer, int budget) {
    struct run r;
    memset(&r, 0, sizeof r);
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, LOOP, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.max_iter_answer = answer;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (a) {
        r.status = agentao_agent_chat(a, "work", budget, NULL, &r.text, NULL);
        r.last = tu_last_turn(a);
        r.history = tu_history(a);
        agentao_agent_free(a);
    }
    r.max_iters = atomic_load(&rec.max_iters);
    r.count = rec.last_max_count;
    r.pending = rec.last_pending_calls ? strdup(rec.last_pending_calls) : NULL;
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
    tu_recorder_destroy(&rec);
    return r;
}

static void run_free(struct run *r) {
    agentao_string_free(r->text);
    free(r->last);
    free(r->history);
    free(r->pending);
}

int main(void) {
    tu_section("stop");
    struct run r = run_with("{\"action\":\"stop\"}", 2);
    CHECK_STATUS(r.status, AGENTAO_STATUS_OK);
    CHECK(r.max_iters == 1);
    CHECK(r.count == 2); /* the turn's budget, not a running total */
    CHECK_CONTAINS(r.pending, "[{\"name\":\"list_directory\",\"args\":");
    CHECK_CONTAINS(r.pending, "d2");
    CHECK_STR_EQ(r.text, "step 2"); /* the last assistant content */
    CHECK_CONTAINS(r.last, TU_KV("incomplete_reason", "max_iterations"));
    CHECK_CONTAINS(r.last, TU_KV("status", "ok"));
    CHECK_CONTAINS(r.last, "\"tool_count\":2");
    CHECK_CONTAINS(r.last, "\"is_answer\":false");
    run_free(&r);

    tu_section("continue: a whole new budget");
    /* Budget 3: three calls, continue, two more calls and the final text within the new
     * budget of 3: exactly one callback. A budget of one more step would need a second. */
    r = run_with("{\"action\":\"continue\"}", 3);
    CHECK_STATUS(r.status, AGENTAO_STATUS_OK);
    CHECK_MSG(r.max_iters == 1, "on_max_iterations ran %d times", r.max_iters);
    CHECK(r.count == 3);
    CHECK_STR_EQ(r.text, "final answer");
    CHECK_CONTAINS(r.last, "\"incomplete_reason\":null");
    CHECK_CONTAINS(r.last, "\"tool_count\":5");
    run_free(&r);

    tu_section("continue, budget exhausted again: asked again");
    r = run_with("{\"action\":\"continue\"}", 2);
    CHECK_STATUS(r.status, AGENTAO_STATUS_OK);
    CHECK(r.max_iters == 2);
    CHECK_STR_EQ(r.text, "final answer");
    run_free(&r);

    tu_section("new_instruction: the message is appended, the budget renewed");
    r = run_with("{\"action\":\"new_instruction\",\"message\":\"Please wrap up in one sentence.\"}", 3);
    CHECK_STATUS(r.status, AGENTAO_STATUS_OK);
    CHECK(r.max_iters == 1);
    CHECK_STR_EQ(r.text, "final answer");
    CHECK_CONTAINS(r.history, "{\"role\":\"user\",\"content\":\"Please wrap up in one sentence.\"}");
    /* Appended after the third call's result, before the fourth call. */
    const char *instr = r.history ? strstr(r.history, "Please wrap up") : NULL;
    const char *l3 = r.history ? strstr(r.history, "\"tool_call_id\":\"l3\"") : NULL;
    const char *l4 = r.history ? strstr(r.history, "\"id\":\"l4\"") : NULL;
    CHECK_MSG(instr && l3 && l4 && l3 < instr && instr < l4, "instruction misplaced in history: %s", r.history);
    run_free(&r);

    tu_section("unknown action stops");
    r = run_with("{\"action\":\"dance\"}", 1);
    CHECK_STATUS(r.status, AGENTAO_STATUS_OK);
    CHECK(r.max_iters == 1);
    CHECK_CONTAINS(r.last, TU_KV("incomplete_reason", "max_iterations"));
    run_free(&r);

    tu_section("the config's max_iterations is used when the call passes -1");
    {
        const char *dir = tu_workspace();
        char *cfg = tu_config(dir, LOOP, "\"max_iterations\":1");
        tu_recorder rec;
        tu_recorder_init(&rec);
        agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
        agentao_agent *a = tu_agent(cfg, &t);
        free(cfg);
        if (a) {
            char *text = NULL;
            CHECK_STATUS(agentao_agent_chat(a, "work", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
            CHECK_STR_EQ(text, "step 1");
            CHECK(rec.last_max_count == 1);
            agentao_string_free(text);
            agentao_agent_free(a);
        }
        tu_recorder_destroy(&rec);
    }
    return tu_finish("test_max_iterations");
}
