/* Freeing an agent ends the processes its background shell runs started, its sub-agents'
 * included: after agentao_agent_free their files stop growing and their pids are gone. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_util.h"

/* Appends to `file` every 0.1 s, forever, after a second; its shell's pid is in `file.pid`. */
#define LOOP(file) "sh -c 'echo $$ > " file ".pid; sleep 1; while true; do echo x >> " file "; sleep 0.1; done'"
#define BG_CALL(id, file)                                                                       \
    "{\"tool_calls\":[{\"id\":\"" id "\",\"name\":\"run_shell_command\",\"arguments\":"        \
    "{\"command\":\"" LOOP(file) "\",\"is_background\":true}}]}"

static long size_of(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

typedef struct {
    const char *path;
    long at_least;
} growth;

static bool grew(void *arg) {
    growth *g = arg;
    return size_of(g->path) >= g->at_least;
}

/* The pid in a "Background process started.\nPID: N" result, 0 if none. */
static long pid_after(const char *hist, const char *from) {
    const char *at = strstr(hist, from);
    if (!at) return 0;
    at = strstr(at, "PID: ");
    return at ? strtol(at + 5, NULL, 10) : 0;
}

static bool gone(void *arg) { return kill((pid_t)(long)arg, 0) != 0 && errno == ESRCH; }

int main(void) {
    tu_section("agentao_agent_free ends the agent's and its sub-agent's background processes");
    const char *dir = tu_workspace();
    char *cfg = tu_printf(
        "{\"working_directory\":\"%s\",\"permissions\":{\"mode\":\"full-access\"},"
        "\"subagents\":{\"definitions\":[{\"name\":\"worker\"}]},"
        "\"llm\":{\"provider\":\"scripted\",\"script\":{\"responses\":["
        BG_CALL("p1", "parent.log") ","
        "{\"tool_calls\":[{\"id\":\"c1\",\"name\":\"agent_worker\",\"arguments\":{\"task\":\"start it\"}}]},"
        "{\"text\":\"started\"}],"
        "\"subagents\":{\"worker\":[" BG_CALL("k1", "child.log") ",{\"text\":\"child started\"}]}}}}",
        dir);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return tu_finish("test_background_processes");
    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "start", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "started");
    agentao_string_free(text);
    char *hist = tu_history(a);
    long parent_pid = pid_after(hist, "\"p1\"");
    CHECK_MSG(parent_pid > 0, "no pid for the parent's run: %s", hist);
    free(hist);

    char *files[2] = {tu_printf("%s/parent.log", dir), tu_printf("%s/child.log", dir)};
    for (int i = 0; i < 2; i++) {
        growth g = {files[i], 6};
        CHECK_MSG(tu_wait_until(grew, &g, TU_BOUND_MS(10000)), "%s never grew", files[i]);
    }
    long shells[2];
    for (int i = 0; i < 2; i++) {
        char *pidfile = tu_printf("%s.pid", files[i]);
        char *pid = tu_read_file(pidfile);
        shells[i] = pid ? strtol(pid, NULL, 10) : 0;
        CHECK_MSG(shells[i] > 0, "no pid in %s", pidfile);
        free(pid);
        free(pidfile);
    }
    uint64_t t0 = tu_now_ms();
    agentao_agent_free(a);
    uint64_t freed_in = tu_now_ms() - t0;
    bool all_gone = parent_pid > 0;
    long pids[3] = {parent_pid, shells[0], shells[1]};
    for (int i = 0; i < 3; i++) {
        bool ok = pids[i] > 0 && tu_wait_until(gone, (void *)pids[i], TU_BOUND_MS(5000));
        CHECK_MSG(ok, "background process %ld outlived agentao_agent_free", pids[i]);
        all_gone &= ok;
    }
    uint64_t gone_in = tu_now_ms() - t0;
    /* A write already under way when the group was ended may still land. */
    tu_sleep_ms(300);
    long before[2] = {size_of(files[0]), size_of(files[1])};
    tu_sleep_ms(1000);
    for (int i = 0; i < 2; i++) {
        long after = size_of(files[i]);
        CHECK_MSG(after == before[i], "%s grew from %ld to %ld bytes after agentao_agent_free", files[i],
                  before[i], after);
    }
    printf("FIGURE agentao_agent_free took %llu ms; its background processes were %s %llu ms after the call\n",
           (unsigned long long)freed_in, all_gone ? "all gone" : "NOT all gone", (unsigned long long)gone_in);
    /* Whatever the outcome, nothing of this test keeps running. */
    if (parent_pid > 0) kill((pid_t)-parent_pid, SIGKILL);
    for (int i = 0; i < 2; i++)
        if (shells[i] > 0) kill((pid_t)shells[i], SIGKILL);
    free(files[0]);
    free(files[1]);
    return tu_finish("test_background_processes");
}
