/* Background sub-agents through the C API (spec §6.5): a run_in_background launch returns at
 * once with the task id while the child keeps running, and agentao_agent_free cancels the
 * running child and returns within its bounded wait. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* Lifecycle events as they arrive. Static: a terminal event may still be on its way when
 * agentao_agent_free returns (the task settles first, then its event is published). */
static struct {
    pthread_mutex_t mu;
    char *events[8];
    atomic_int n;
} seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void observe(void *userdata, const char *event_json) {
    (void)userdata;
    if (!strstr(event_json, "\"event_type\":\"subagent_lifecycle\"")) return;
    pthread_mutex_lock(&seen.mu);
    int i = atomic_load(&seen.n);
    if (i < 8) {
        seen.events[i] = strdup(event_json);
        atomic_store(&seen.n, i + 1);
    }
    pthread_mutex_unlock(&seen.mu);
}

static void test_free_with_a_running_background_child(void) {
    tu_section("agentao_agent_free cancels a running background child, bounded");
    const char *dir = tu_workspace();
    char *cfg = tu_printf(
        "{\"working_directory\":\"%s\",\"subagents\":{\"definitions\":[{\"name\":\"slow\"}],"
        "\"background\":{\"enabled\":true}},\"llm\":{\"provider\":\"scripted\",\"script\":{"
        "\"responses\":[{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"agent_slow\",\"arguments\":"
        "{\"task\":\"wait\",\"run_in_background\":true}}]},{\"text\":\"Started.\"}],"
        "\"subagents\":{\"slow\":[{\"fault\":{\"type\":\"stall\",\"ms\":60000},\"text\":\"late\"}]}}}}",
        dir);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    uint64_t obs_id = 0;
    CHECK_STATUS(agentao_agent_add_host_event_observer(a, observe, NULL, NULL, &obs_id, NULL),
                 AGENTAO_STATUS_OK);
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK(text && strcmp(text, "Started.") == 0);
    agentao_string_free(text);
    /* The turn ended; the child is still running (spawned, nothing terminal). */
    char *history = tu_history(a);
    CHECK(history && strstr(history, "Background agent 'slow' started (ID: "));
    free(history);
    CHECK(tu_wait_count(&seen.n, 1, 10000));
    CHECK(atomic_load(&seen.n) == 1);

    uint64_t t0 = tu_now_ms();
    agentao_agent_free(a);
    uint64_t took = tu_now_ms() - t0;
    printf("agentao_agent_free with a running background child took %llu ms\n",
           (unsigned long long)took);
    /* The wait is bounded at 5 s; a child that honours its token stops far sooner. */
    CHECK(took < 7000);
    CHECK(tu_wait_count(&seen.n, 2, 10000));
    pthread_mutex_lock(&seen.mu);
    CHECK(strstr(seen.events[0], "\"phase\":\"spawned\"") != NULL);
    CHECK(seen.events[1] && strstr(seen.events[1], "\"phase\":\"cancelled\"") != NULL);
    char *task = tu_json_str(seen.events[0], "parent_task_id");
    CHECK(task && strlen(task) == 8);
    CHECK(task && seen.events[1] && strstr(seen.events[1], task) != NULL);
    free(task);
    for (int i = 0; i < atomic_load(&seen.n); i++) free(seen.events[i]);
    pthread_mutex_unlock(&seen.mu);
}

int main(void) {
    test_free_with_a_running_background_child();
    return tu_finish("test_background");
}
