/* Host faults (docs/reliability.md, "Host"): an unread host-event stream, a slow emit, a
 * confirm_tool that blocks its thread. Whatever the host does, a cancel or agentao_agent_free
 * ends the turn promptly, on_done fires once, userdata_free runs once after everything, and
 * nothing is lost silently. Each section prints its measured figures ("FIGURE ..."). */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* Resident set size of this process, in KiB (0 when unreadable). */
static long rss_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long v = 0;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

/* A turn of `n` glob calls (distinct patterns, so no loop guard), then two answers. */
static char *glob_turn(int n) {
    size_t cap = (size_t)n * 96 + 256;
    char *s = malloc(cap);
    size_t len = 0;
    len += (size_t)snprintf(s + len, cap - len, "{\"tool_calls\":[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "%s{\"id\":\"g%d\",\"name\":\"glob\",\"arguments\":{\"pattern\":\"*%d.txt\"}}",
                                i ? "," : "", i, i);
    snprintf(s + len, cap - len, "]},{\"text\":\"done\"},{\"text\":\"next turn\"}");
    return s;
}

/* Waits until the turn is blocked on the full stream: it stops emitting for a while (one quiet
 * poll is not enough on a loaded machine or under valgrind, where a tool batch can take longer
 * than a poll). */
static void wait_until_stalled(tu_recorder *rec) {
    int last = -1, quiet = 0;
    for (int i = 0; i < 400 * TU_SLOWDOWN; i++) {
        int now = atomic_load(&rec->emits);
        quiet = (now == last && now > 0) ? quiet + 1 : 0;
        if (quiet >= 4 * TU_SLOWDOWN) return;
        last = now;
        tu_sleep_ms(25);
    }
}

static void unread_stream(bool by_free) {
    tu_section(by_free ? "unread host-event stream: agentao_agent_free ends the turn"
                       : "unread host-event stream: cancel ends the turn, the gap is reported");
    const char *dir = tu_workspace();
    char *responses = glob_turn(100);
    char *cfg = tu_config(dir, responses, NULL);
    free(responses);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    long rss0 = rss_kb("VmRSS");
    agentao_host_event_stream *hs = NULL;
    CHECK_STATUS(agentao_agent_host_events_open(a, NULL, &hs, NULL), AGENTAO_STATUS_OK);
    agentao_cancel_token *tok = agentao_cancel_token_new();
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "go", -1, tok, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    wait_until_stalled(&rec);
    CHECK_MSG(atomic_load(&d.calls) == 0, "the turn should wait for the unread stream");
    uint64_t t0 = tu_now_ms();
    if (by_free) {
        agentao_agent_free(a);
        a = NULL;
    } else {
        agentao_cancel_token_cancel(tok, "host-gave-up");
    }
    CHECK(tu_wait_count(&d.calls, 1, 5000));
    uint64_t lag = d.at_ms - t0;
    long grew = rss_kb("VmRSS") - rss0;
    printf("FIGURE host.unread_stream.%s cancel_to_done_ms=%llu rss_growth_kb=%ld\n",
           by_free ? "free" : "cancel", (unsigned long long)lag, grew);
    CHECK_MSG(lag < TU_BOUND_MS(1000), "on_done came %llu ms after the %s", (unsigned long long)lag,
              by_free ? "free" : "cancel");
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);

    /* Reading now: the queued events, then the gap, reported once with its size. */
    int events = 0, gaps = 0, after_gap = 0;
    for (;;) {
        char *ev = NULL;
        agentao_error *err = NULL;
        agentao_status st = agentao_host_event_stream_next(hs, 50, &ev, &err);
        if (st == AGENTAO_STATUS_OK) {
            if (gaps) after_gap++;
            else events++;
            agentao_string_free(ev);
        } else if (st == AGENTAO_STATUS_EVENTS_DROPPED) {
            CHECK(ev == NULL);
            CHECK_CONTAINS(agentao_error_message(err), "dropped");
            gaps++;
        } else {
            agentao_error_free(err);
            break;
        }
        agentao_error_free(err);
    }
    CHECK_MSG(events == 64, "%d events before the gap", events);
    CHECK_MSG(gaps == 1, "%d gaps reported", gaps);
    CHECK_MSG(after_gap == 0, "%d events after the gap", after_gap);

    if (!by_free) {
        /* The agent is free for the next turn, and the stream delivers again. */
        char *text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "again", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "done");
        agentao_string_free(text);
    }
    agentao_host_event_stream_free(hs);
    agentao_cancel_token_free(tok);
    tu_done_destroy(&d);
    if (a) agentao_agent_free(a);
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
out:
    tu_recorder_destroy(&rec);
}

static const char *WRITE_TURN =
    "{\"text\":\"About to write.\",\"tool_calls\":[{\"id\":\"w1\",\"name\":\"write_file\",\"arguments\":{\"file_path\":\"out.txt\",\"content\":\"x\"}}]},"
    "{\"text\":\"written\"}";

static void slow_emit(void) {
    tu_section("a slow emit (20 ms per event): cancel still ends the turn promptly");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"text\":\"abcdefghijklmnopqrstuvwxyz\",\"chunk_size\":1,\"repeat\":50}", NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    rec.emit_delay_us = 20000;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    agentao_cancel_token *tok = agentao_cancel_token_new();
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "go", -1, tok, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&rec.emits, 10, 5000));
    uint64_t t0 = tu_now_ms();
    agentao_cancel_token_cancel(tok, "host-gave-up");
    CHECK(tu_wait_count(&d.calls, 1, 5000));
    uint64_t lag = d.at_ms - t0;
    printf("FIGURE host.slow_emit cancel_to_done_ms=%llu\n", (unsigned long long)lag);
    /* One emit in progress, then turn_end: bounded by a few emit delays. */
    CHECK_MSG(lag < TU_BOUND_MS(1000), "on_done came %llu ms after the cancel", (unsigned long long)lag);
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
    agentao_cancel_token_free(tok);
    tu_done_destroy(&d);
    agentao_agent_free(a);
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
out:
    tu_recorder_destroy(&rec);
}

static atomic_int blocking_returned;

static void blocking_confirm(void *userdata, const char *tool, const char *desc, const char *args,
                             const char *call_id, agentao_reply *reply) {
    tu_recorder *rec = userdata;
    atomic_fetch_add(&rec->confirms, 1);
    tu_sleep_ms(1500); /* a UI that never comes back in time */
    agentao_reply_confirm(reply, AGENTAO_CONFIRMATION_ALLOW, NULL);
    atomic_store(&blocking_returned, 1);
}

static void blocking_callback(void) {
    tu_section("a confirm_tool that blocks its thread: cancel ends the turn, the call never runs");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, WRITE_TURN, NULL);
    tu_recorder rec;
    tu_recorder_init(&rec);
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_ALL);
    t.confirm_tool = blocking_confirm;
    agentao_agent *a = tu_agent(cfg, &t);
    free(cfg);
    if (!a) goto out;
    agentao_cancel_token *tok = agentao_cancel_token_new();
    tu_done d;
    tu_done_init(&d);
    CHECK_STATUS(agentao_agent_run(a, "write", -1, tok, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
    CHECK(tu_wait_count(&rec.confirms, 1, 5000));
    tu_sleep_ms(100);
    uint64_t t0 = tu_now_ms();
    agentao_cancel_token_cancel(tok, "host-gave-up");
    CHECK(tu_wait_count(&d.calls, 1, 5000));
    uint64_t lag = d.at_ms - t0;
    printf("FIGURE host.blocking_confirm cancel_to_done_ms=%llu\n", (unsigned long long)lag);
    CHECK_MSG(lag < TU_BOUND_MS(500), "on_done came %llu ms after the cancel", (unsigned long long)lag);
    CHECK_MSG(atomic_load(&blocking_returned) == 0, "the callback was still blocked");
    CHECK_STATUS(atomic_load(&d.status), AGENTAO_STATUS_CANCELLED);
    /* Free while the callback still blocks: userdata_free waits for it and its reply. */
    agentao_agent_free(a);
    tu_sleep_ms(100);
    CHECK_MSG(atomic_load(&rec.freed) == 0, "userdata_free ran while a callback was running");
    CHECK(tu_wait_count(&rec.freed, 1, 5000));
    CHECK(atomic_load(&blocking_returned) == 1);
    char *path = tu_printf("%s/out.txt", dir);
    CHECK_MSG(!tu_file_exists(path), "the cancelled call ran after its late approval");
    free(path);
    agentao_cancel_token_free(tok);
    tu_done_destroy(&d);
out:
    tu_recorder_destroy(&rec);
}

/* ---- churn: many host threads creating, running, cancelling and freeing agents ---------- */

static atomic_int churn_freed;
static atomic_int churn_done_twice;
static const char *churn_cfg;

static void churn_free(void *userdata) {
    (void)userdata;
    atomic_fetch_add(&churn_freed, 1);
}

static void *churn_thread(void *arg) {
    long id = (long)(intptr_t)arg;
    int turns = 3;
    const char *env = getenv("AGENTAO_CHURN_TURNS");
    if (env && atoi(env) > 0) turns = atoi(env);
    for (int k = 0; k < turns; k++) {
        agentao_transport t = {0};
        t.struct_size = sizeof t;
        t.userdata_free = churn_free;
        agentao_agent *a = NULL;
        if (agentao_agent_new(churn_cfg, &t, &a, NULL) != AGENTAO_STATUS_OK) {
            tu_fail_at(__FILE__, __LINE__, "agent_new failed in thread %ld", id);
            continue;
        }
        agentao_cancel_token *tok = agentao_cancel_token_new();
        tu_done d;
        tu_done_init(&d);
        CHECK_STATUS(agentao_agent_run(a, "hi", -1, tok, tu_on_done, &d, NULL), AGENTAO_STATUS_OK);
        switch ((id + k) % 3) {
        case 0: break;                                            /* let it finish */
        case 1: agentao_cancel_token_cancel(tok, "churn"); break; /* cancel at once */
        case 2: agentao_agent_free(a); a = NULL; break;           /* free while it runs */
        }
        if (!tu_wait_count(&d.calls, 1, 30000)) {
            tu_fail_at(__FILE__, __LINE__, "no on_done within 30 s");
            /* A late on_done still writes to d: keep it alive (ctest's timeout ends a hang). */
            tu_wait_count(&d.calls, 1, 24 * 3600 * 1000);
        }
        tu_sleep_ms(1);
        if (atomic_load(&d.calls) != 1) atomic_fetch_add(&churn_done_twice, 1);
        if (a) agentao_agent_free(a);
        agentao_cancel_token_free(tok);
        tu_done_destroy(&d);
    }
    return NULL;
}

static void churn(void) {
    enum { THREADS = 200 };
    int turns = 3;
    const char *env = getenv("AGENTAO_CHURN_TURNS");
    if (env && atoi(env) > 0) turns = atoi(env);
    tu_section("200 host threads: new, run, cancel or free, repeat");
    const char *dir = tu_workspace();
    char *cfg = tu_config(dir, "{\"chunks\":[\"a\",\"b\",\"c\"],\"delay_ms\":2}", NULL);
    churn_cfg = cfg;
    long rss0 = rss_kb("VmRSS");
    uint64_t t0 = tu_now_ms();
    pthread_t th[THREADS];
    int started = 0;
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&th[started], NULL, churn_thread, (void *)(intptr_t)i) == 0) started++;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    CHECK(tu_wait_count(&churn_freed, started * turns, 10000));
    printf("FIGURE host.churn threads=%d turns=%d took_ms=%llu rss_growth_kb=%ld\n", started,
           started * turns, (unsigned long long)(tu_now_ms() - t0), rss_kb("VmRSS") - rss0);
    CHECK_MSG(started == THREADS, "only %d threads started", started);
    CHECK_MSG(atomic_load(&churn_freed) == started * turns, "userdata_free ran %d times for %d agents",
              atomic_load(&churn_freed), started * turns);
    CHECK_MSG(atomic_load(&churn_done_twice) == 0, "%d completions fired more than once",
              atomic_load(&churn_done_twice));
    free(cfg);
}

int main(void) {
    unread_stream(false);
    unread_stream(true);
    slow_emit();
    blocking_callback();
    churn();
    printf("FIGURE host.peak_rss_kb=%ld\n", rss_kb("VmHWM"));
    return tu_finish("test_host_faults");
}
