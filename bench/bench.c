/*
 * bench.c: the libagentao benchmark. Drives the library only through its C ABI
 * (include/agentao.h) against (a) the loopback OpenAI mock serving pre-rendered SSE
 * (`mock-openai --script F --prerender`, its own time read from GET /v1/_stats and
 * subtracted) and (b) the scripted provider.
 *
 *   bench --mock PATH/mock-openai [--hyper-floor PATH] [--out results.json] [--quick]
 *         [--only SECTION] [--cpu N]   (--cpu: the bench, the library's threads, the mock and
 *                                        the floors all pinned to CPU N)
 *   bench --mock PATH/mock-openai --callgrind     (instructions per turn and per iteration)
 *   bench --mock PATH/mock-openai --only mcp      (an MCP call against its stdio floor;
 *                                                  mcpcallgrind: per turn with one MCP server
 *                                                  and per MCP call, with the raw client's count)
 *   bench --mock PATH/mock-openai --only acp      (agentao-acp against the library's own
 *                                                  on_delta on the same mock)
 *   bench --mock PATH/mock-openai --only session  (500 turns against a 32k window: CPU and
 *                                                  instructions per request early and late,
 *                                                  RSS, a microcompaction pass)
 *   bench --mock PATH/mock-openai --only growth   (instructions per request at message 20 and
 *                                                  at message 2,000 of a session, per wire)
 *
 * Every HTTP-path figure is printed next to its floor: a raw blocking-socket client in this
 * file replays the library's own request bodies (captured from the mock with
 * --raw-requests-out) to the same mock in the same run, and the ratio library/floor follows.
 * With --hyper-floor PATH (bench/run.sh passes target/release/hyper-floor) a second, realistic
 * floor follows it: bench/hyper-floor, a minimal hyper 1.x client, replays the same bodies.
 * Wall-time floors (wall - the mock's busy time) depend on where the scheduler puts the client
 * and the mock, so each round's ratio is printed too, and CPU-time floors beside them; the
 * streaming floors come twice: finding line ends only, and decoding each delta's text.
 *
 * Every figure is the median and p90 over repeated runs after a warm-up. Memory and scale
 * figures come from fresh child processes (this program re-executed with --child), so one
 * scenario's heap never inflates another's. See docs/performance.md.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentao.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND 1
#endif
#endif
#ifndef HAVE_CALLGRIND
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS
#endif

/* ------------------------------------------------------------------ utilities */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of this process (all threads) or of the calling thread. */
static double cpu_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void check(agentao_status st, agentao_error *err, const char *what) {
    if (st != AGENTAO_STATUS_OK) {
        die("%s: %s: %s", what, agentao_status_name(st), err ? agentao_error_message(err) : "");
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double median, p90;
    int n;
} stat_t;

/* Median and p90 (nearest rank) of n samples; sorts them. */
static stat_t stats(double *v, int n) {
    stat_t s = {0, 0, n};
    if (n <= 0) return s;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    s.median = (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
    int r = (int)((90 * n + 99) / 100); /* ceil(0.9 n) */
    if (r < 1) r = 1;
    s.p90 = v[r - 1];
    return s;
}

/* Resident memory in KiB, from /proc/self/statm. */
static long rss_kib(void) {
    long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
    fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Peak resident memory (VmHWM) in KiB. */
static long hwm_kib(void) {
    char line[256];
    long v = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &v) == 1) break;
    fclose(f);
    return v;
}

static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* A growable string. */
typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) die("vsnprintf");
        if (b->p && (size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        b->cap = (b->cap + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) die("out of memory");
    }
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) die("cannot write %s", path);
}

/* ------------------------------------------------------------------ environment */

static char g_ws[512];      /* workspace with small files f1.txt .. f200.txt */
static char g_tmp[256];     /* scratch directory (scripts, port files) */
static char g_mock[1024];   /* path of the mock-openai binary */
static char g_self[1024];   /* this program, for --child */
static char g_hyper[1024];  /* the hyper-floor binary (--hyper-floor), or empty */
static int g_quick = 0;
static int g_cpu = -1; /* --cpu N: this process, its threads and children pinned to CPU N */
static const char *g_only = NULL; /* --only turn|stream|loop|events|hosttool|memory|scale|mcp|hooks|acp|growth|bindings|... */

static int want(const char *section) { return !g_only || strcmp(g_only, section) == 0; }

static void make_workspace(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/agentao-bench-XXXXXX");
    _Static_assert(sizeof g_tmp < sizeof g_ws - 16, "paths fit");
    if (!mkdtemp(g_tmp)) die("mkdtemp: %s", strerror(errno));
    snprintf(g_ws, sizeof g_ws, "%s/ws", g_tmp);
    if (mkdir(g_ws, 0700) != 0) die("mkdir %s", g_ws);
    for (int i = 1; i <= 200; i++) {
        char p[600], body[128];
        snprintf(p, sizeof p, "%s/f%d.txt", g_ws, i);
        snprintf(body, sizeof body, "line one of file %d\nline two\nline three\n", i);
        write_file(p, body);
    }
}

static void rm_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench: could not remove %s\n", dir);
}

/* ------------------------------------------------------------------ scripts */

/* A response calling read_file on f<k>.txt (distinct arguments, so no loop guard trips). */
static void add_tool_response(sbuf *b, int k) {
    sb_add(b,
           "{\"tool_calls\":[{\"id\":\"call_%d\",\"name\":\"read_file\","
           "\"arguments\":{\"file_path\":\"f%d.txt\"}}]}",
           k, k);
}

/* {"responses":[ n read_file calls ..., final text ]} */
static char *script_tool_loop(int n, const char *final_text) {
    sbuf b = {0};
    sb_add(&b, "{\"responses\":[");
    for (int k = 1; k <= n; k++) {
        add_tool_response(&b, k);
        sb_add(&b, ",");
    }
    sb_add(&b, "{\"text\":\"%s\"}]}", final_text);
    return b.p;
}

/* One response with `calls` parallel read_file calls, `iters` times (distinct arguments via
 * `limit`), then a final text: host-event traffic. */
static char *script_host_events(int iters, int calls) {
    sbuf b = {0};
    sb_add(&b, "{\"responses\":[");
    for (int it = 1; it <= iters; it++) {
        sb_add(&b, "{\"tool_calls\":[");
        for (int c = 1; c <= calls; c++)
            sb_add(&b,
                   "%s{\"id\":\"c%d_%d\",\"name\":\"read_file\",\"arguments\":{\"file_path\":"
                   "\"f%d.txt\",\"limit\":%d}}",
                   c > 1 ? "," : "", it, c, c, it);
        sb_add(&b, "]},");
    }
    sb_add(&b, "{\"text\":\"done\"}]}");
    return b.p;
}

static char *script_text_stream(int chunks, int chunk_chars, int as_exhausted) {
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyz";
    char unit[64];
    memcpy(unit, alpha, (size_t)chunk_chars);
    unit[chunk_chars] = 0;
    sbuf b = {0};
    if (as_exhausted)
        sb_add(&b, "{\"responses\":[],\"exhausted\":{\"repeat_text\":{\"unit\":\"%s\",\"count\":%d}}}",
               unit, chunks);
    else
        sb_add(&b, "{\"responses\":[{\"repeat_text\":{\"unit\":\"%s\",\"count\":%d}}]}", unit,
               chunks);
    return b.p;
}

static const char *ONE_TEXT = "Hello from the benchmark.";

static char *config_scripted(const char *script) {
    sbuf b = {0};
    sb_add(&b, "{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"scripted\",\"script\":%s}}",
           g_ws, script);
    return b.p;
}

/* `wire` is an `llm.provider` of docs/wires.md; `base_url` the mock's `.../v1` (the anthropic
 * wire adds `/v1/messages` itself, so it gets the URL without `/v1`). */
static char *config_wire(const char *wire, const char *base_url) {
    sbuf b = {0};
    size_t n = strlen(base_url);
    int strip = strcmp(wire, "anthropic") == 0 && n >= 3 && strcmp(base_url + n - 3, "/v1") == 0;
    sb_add(&b,
           "{\"working_directory\":\"%s\",\"llm\":{\"provider\":\"%s\",\"base_url\":\"%.*s\","
           "\"api_key\":\"sk-bench\",\"model\":\"bench-model\",\"max_attempts\":1}}",
           g_ws, wire, (int)(strip ? n - 3 : n), base_url);
    return b.p;
}

static char *config_openai(const char *base_url) { return config_wire("openai", base_url); }

/* ------------------------------------------------------------------ the mock server */

typedef struct {
    pid_t pid;
    int port;
    char base_url[64];
} mock_t;

static int mock_seq = 0;

/* Starts `mock-openai --script <script> --prerender`: every response rendered once. With
 * `raw_out`, the received request bodies go to that file (one a line) when the mock stops.
 * With `session_window` > 0 the mock is instead the session model of that window (`--session`):
 * a session of any length, compactions included. */
static mock_t mock_start_any(const char *script, const char *raw_out, long session_window) {
    mock_t m = {0};
    char sp[512], pf[512], win[32];
    int id = ++mock_seq;
    snprintf(sp, sizeof sp, "%s/mock%d.json", g_tmp, id);
    snprintf(pf, sizeof pf, "%s/mock%d.port", g_tmp, id);
    snprintf(win, sizeof win, "%ld", session_window);
    if (!session_window) write_file(sp, script);
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        /* A bench that dies must not leave its server behind (holding the caller's pipe). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        if (session_window)
            execl(g_mock, g_mock, "--session", win, "--port-file", pf, "--no-stdin", (char *)NULL);
        else if (raw_out)
            execl(g_mock, g_mock, "--script", sp, "--prerender", "--port-file", pf, "--no-stdin",
                  "--raw-requests-out", raw_out, (char *)NULL);
        else
            execl(g_mock, g_mock, "--script", sp, "--prerender", "--port-file", pf, "--no-stdin",
                  (char *)NULL);
        _exit(127);
    }
    m.pid = pid;
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(pf, "r");
        if (f) {
            int ok = fscanf(f, "%d", &m.port) == 1;
            fclose(f);
            if (ok) break;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) die("mock-openai exited (status %d)", st);
        usleep(5000);
    }
    if (!m.port) die("mock-openai did not start");
    snprintf(m.base_url, sizeof m.base_url, "http://127.0.0.1:%d/v1", m.port);
    return m;
}

static mock_t mock_start_rec(const char *script, const char *raw_out) {
    return mock_start_any(script, raw_out, 0);
}

static mock_t mock_start(const char *script) { return mock_start_rec(script, NULL); }

static void mock_stop(mock_t *m) {
    if (m->pid > 0) {
        kill(m->pid, SIGTERM);
        waitpid(m->pid, NULL, 0);
        m->pid = 0;
    }
}

/* A figure of the server's `GET /v1/_stats` answer: "busy_nanos" or "requests". */
static double mock_stat(const mock_t *m, const char *key);

/* The server's busy nanoseconds so far. */
static double mock_busy_ns(const mock_t *m) { return mock_stat(m, "busy_nanos"); }

static double mock_stat(const mock_t *m, const char *key) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)m->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("stats: connect");
    const char *req = "GET /v1/_stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, req, strlen(req)) < 0) die("stats: write");
    char buf[2048];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = 0;
    close(fd);
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\":", key);
    const char *p = strstr(buf, needle);
    if (!p) die("stats: bad answer");
    return strtod(p + strlen(needle), NULL);
}


/* ------------------------------------------------------------------ host callbacks */

typedef struct {
    atomic_long emits;
    atomic_long deltas;
    double tool_ms; /* sum of tool_complete duration_ms (emit calls of one agent never overlap) */
    double t_first_delta;
    double t_done;
    agentao_status status;
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} host_t;

static void host_init(host_t *h) {
    memset(h, 0, sizeof *h);
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
}

static void host_reset(host_t *h) {
    atomic_store(&h->emits, 0);
    atomic_store(&h->deltas, 0);
    h->tool_ms = 0;
    h->t_first_delta = 0;
    h->t_done = 0;
    h->done = 0;
}

static void on_emit(void *ud, const char *json) {
    host_t *h = ud;
    atomic_fetch_add_explicit(&h->emits, 1, memory_order_relaxed);
    /* {"type":"tool_complete",...,"duration_ms":1.23,...} */
    if (json[9] == 't' && strncmp(json + 9, "tool_complete\"", 14) == 0) {
        const char *p = strstr(json, "\"duration_ms\":");
        if (p) h->tool_ms += strtod(p + 14, NULL);
    }
}

static agentao_status on_subscribe(void *ud, agentao_listener_fn l, void *lud, uint64_t *id) {
    (void)ud, (void)l, (void)lud;
    *id = 1;
    return AGENTAO_STATUS_OK;
}

static void on_unsubscribe(void *ud, uint64_t id) { (void)ud, (void)id; }

static void on_delta(void *ud, const char *json) {
    host_t *h = ud;
    (void)json;
    if (atomic_fetch_add_explicit(&h->deltas, 1, memory_order_relaxed) == 0)
        h->t_first_delta = now_s();
}

static void on_done(void *ud, agentao_status st, const char *outcome, const agentao_error *err) {
    host_t *h = ud;
    (void)outcome, (void)err;
    double t = now_s();
    pthread_mutex_lock(&h->mu);
    h->t_done = t;
    h->status = st;
    h->done = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void host_wait(host_t *h) {
    pthread_mutex_lock(&h->mu);
    while (!h->done) pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static agentao_agent *agent_new(const char *config, host_t *h) {
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.userdata = h;
    t.emit = on_emit;
    t.subscribe = on_subscribe;
    t.unsubscribe = on_unsubscribe;
    agentao_agent *a = NULL;
    agentao_error *err = NULL;
    check(agentao_agent_new(config, h ? &t : NULL, &a, &err), err, "agentao_agent_new");
    return a;
}

static void reset_history(agentao_agent *a) {
    agentao_error *err = NULL;
    check(agentao_agent_set_history(a, "[]", &err), err, "set_history");
}

/* ------------------------------------------------------------------ the floor: a raw client */

/* The library's request bodies, captured from the mock (one a line), each with the HTTP head a
 * minimal client sends, ready to write. */
typedef struct {
    char **req;
    size_t *len;
    int n;
    char path[600]; /* the captured bodies, one a line: the hyper floor's request file */
} bodies_t;

static bodies_t bodies_read(const char *path);

/* Runs `turn` once on an agent pointed at a recording mock serving `script`, and returns the
 * request bytes the library sent, as whole HTTP requests for the raw client. */
static bodies_t capture_requests(const char *script, void (*turn)(agentao_agent *)) {
    char out[600];
    snprintf(out, sizeof out, "%s/requests%d.raw", g_tmp, mock_seq + 1);
    mock_t m = mock_start_rec(script, out);
    char *cfg = config_openai(m.base_url);
    agentao_agent *a = agent_new(cfg, NULL);
    turn(a);
    agentao_agent_free(a);
    free(cfg);
    mock_stop(&m);
    return bodies_read(out);
}

/* The request file `path` (one body a line) as whole HTTP requests for the raw client. */
static bodies_t bodies_read(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die("no captured requests in %s", path);
    bodies_t b = {0};
    snprintf(b.path, sizeof b.path, "%s", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n') line[--n] = 0;
        sbuf r = {0};
        sb_add(&r,
               "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\n"
               "authorization: Bearer sk-bench\r\ncontent-type: application/json\r\n"
               "accept: text/event-stream\r\ncontent-length: %zd\r\n\r\n%s",
               n, line);
        b.req = realloc(b.req, (size_t)(b.n + 1) * sizeof *b.req);
        b.len = realloc(b.len, (size_t)(b.n + 1) * sizeof *b.len);
        b.req[b.n] = r.p;
        b.len[b.n] = r.len;
        b.n++;
    }
    free(line);
    fclose(f);
    if (b.n == 0) die("no captured requests in %s", path);
    return b;
}

static void bodies_free(bodies_t *b) {
    for (int i = 0; i < b->n; i++) free(b->req[i]);
    free(b->req);
    free(b->len);
}

/* One keep-alive connection of the raw client. */
typedef struct {
    int fd, port;
    char *buf;
    size_t cap;
} raw_t;

static void raw_connect(raw_t *r) {
    r->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)r->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (r->fd < 0 || connect(r->fd, (struct sockaddr *)&a, sizeof a) != 0) die("raw: connect");
    int one = 1;
    setsockopt(r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static raw_t raw_open(const mock_t *m) {
    raw_t r = {-1, m->port, NULL, 1 << 20};
    r.buf = malloc(r.cap);
    if (!r.buf) die("out of memory");
    raw_connect(&r);
    return r;
}

static void raw_close(raw_t *r) {
    if (r->fd >= 0) close(r->fd);
    free(r->buf);
}

/* Sends one request and reads the whole response (head, then content-length bytes of SSE)
 * into r->buf; returns the body's offset there and sets *body_len. */
static size_t raw_send_read(raw_t *r, const char *req, size_t len, size_t *body_len) {
    for (size_t off = 0; off < len;) {
        ssize_t w = write(r->fd, req + off, len - off);
        if (w <= 0) die("raw: write: %s", strerror(errno));
        off += (size_t)w;
    }
    size_t have = 0, head = 0;
    *body_len = 0;
    for (;;) {
        if (have == r->cap) {
            /* A streamed turn's body is megabytes: grow once, the next run reuses the room. */
            r->cap *= 2;
            r->buf = realloc(r->buf, r->cap);
            if (!r->buf) die("out of memory");
        }
        ssize_t n = read(r->fd, r->buf + have, r->cap - have);
        if (n <= 0) die("raw: read: %s", n < 0 ? strerror(errno) : "connection closed");
        have += (size_t)n;
        if (!head) {
            char *e = memmem(r->buf, have, "\r\n\r\n", 4);
            if (!e) continue;
            head = (size_t)(e - r->buf) + 4;
            char *cl = memmem(r->buf, head, "content-length:", 15);
            if (!cl) die("raw: response without content-length");
            *body_len = strtoul(cl + 15, NULL, 10);
        }
        if (have >= head + *body_len) break;
    }
    return head;
}

/* Sends one request and reads the whole response, scanning it for lines as any SSE reader
 * must (and no more: it never looks inside a line). Returns the number of `data:` lines. */
static long raw_exchange(raw_t *r, const char *req, size_t len) {
    size_t body_len;
    size_t head = raw_send_read(r, req, len, &body_len);
    long lines = 0;
    const char *p = r->buf + head, *end = p + body_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;
        if (nl - p >= 5 && memcmp(p, "data:", 5) == 0) lines++;
        p = nl + 1;
    }
    return lines;
}

/* The text a decoding client delivers: every delta's content, appended. */
typedef struct {
    char *p;
    size_t len, cap;
    long deltas;
} text_t;

static void text_room(text_t *t, size_t more) {
    if (t->len + more <= t->cap) return;
    t->cap = (t->len + more) * 2;
    t->p = realloc(t->p, t->cap);
    if (!t->p) die("out of memory");
}

static int hex4(const char *p, const char *end, unsigned *v) {
    if (end - p < 4) return 0;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d > 15) return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

/* Appends the JSON string at p (its opening quote) to t, unescaped, as UTF-8; returns 0 if it
 * is not a whole, well-escaped string before end. */
static int json_string_append(text_t *t, const char *p, const char *end) {
    p++;
    for (;;) {
        const char *q = p;
        while (q < end && *q != '"' && *q != '\\') q++;
        if (q == end) return 0;
        text_room(t, (size_t)(q - p) + 4);
        memcpy(t->p + t->len, p, (size_t)(q - p));
        t->len += (size_t)(q - p);
        if (*q == '"') return 1;
        if (end - q < 2) return 0;
        char e = q[1];
        p = q + 2;
        char c;
        switch (e) {
        case '"': case '\\': case '/': c = e; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'n': c = '\n'; break;
        case 'r': c = '\r'; break;
        case 't': c = '\t'; break;
        case 'u': {
            unsigned u, lo;
            if (!hex4(p, end, &u)) return 0;
            p += 4;
            if (u >= 0xd800 && u < 0xdc00) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo) ||
                    lo < 0xdc00 || lo >= 0xe000)
                    return 0;
                p += 6;
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
            } else if (u >= 0xdc00 && u < 0xe000) {
                return 0;
            }
            char *o = t->p + t->len;
            if (u < 0x80) {
                o[0] = (char)u;
                t->len += 1;
            } else if (u < 0x800) {
                o[0] = (char)(0xc0 | u >> 6), o[1] = (char)(0x80 | (u & 0x3f));
                t->len += 2;
            } else if (u < 0x10000) {
                o[0] = (char)(0xe0 | u >> 12), o[1] = (char)(0x80 | (u >> 6 & 0x3f));
                o[2] = (char)(0x80 | (u & 0x3f));
                t->len += 3;
            } else {
                o[0] = (char)(0xf0 | u >> 18), o[1] = (char)(0x80 | (u >> 12 & 0x3f));
                o[2] = (char)(0x80 | (u >> 6 & 0x3f)), o[3] = (char)(0x80 | (u & 0x3f));
                t->len += 4;
            }
            continue;
        }
        default: return 0;
        }
        t->p[t->len++] = c;
    }
}

/* The least a client delivering the text must do with one `data:` payload: find
 * choices[0].delta.content and append it, unescaped. A minimal scan, not a JSON parser: the
 * first `"content":` after `"delta":` (a JSON string cannot hold an unescaped quote, so the
 * match is a key). A null or absent content is no delta; a malformed string stops the bench. */
static void sse_data_text(text_t *t, const char *p, const char *end) {
    const char *d = memmem(p, (size_t)(end - p), "\"delta\":", 8);
    if (!d) return;
    const char *c = memmem(d + 8, (size_t)(end - d - 8), "\"content\":", 10);
    if (!c) return;
    c += 10;
    while (c < end && *c == ' ') c++;
    if (c == end || *c != '"') return;
    if (!json_string_append(t, c, end)) die("raw text: malformed content string");
    t->deltas++;
}

/* The decoder on lines the mock does not send (escapes, surrogate pairs, other deltas, bad
 * strings): run before the decoding floor is measured, so it cannot count a wrong text. */
static void sse_data_text_selftest(void) {
    static const struct {
        const char *line, *text;
        long deltas;
    } cases[] = {
        {"{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"ab\"}}]}", "ab", 1},
        {"{\"choices\":[{\"delta\":{\"content\":\"c\\\"\\\\\\/\\n\\t\\u00e9\\u20ac\\ud83d\\ude00\"}}]}",
         "c\"\\/\n\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 1},
        {"{\"choices\":[{\"delta\":{\"content\": \"\"}}]}", "", 1},
        {"{\"choices\":[{\"delta\":{\"content\":null,\"reasoning_content\":\"x\"}}]}", "", 0},
        {"{\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":\"{\\\"content\\\":1}\"}}]}}]}", "", 0},
        {"{\"choices\":[],\"usage\":{\"prompt_tokens\":1}}", "", 0},
        {"[DONE]", "", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        text_t t = {0};
        size_t n = strlen(cases[i].line);
        sse_data_text(&t, cases[i].line, cases[i].line + n);
        if (t.deltas != cases[i].deltas || t.len != strlen(cases[i].text) ||
            (t.len && memcmp(t.p, cases[i].text, t.len) != 0))
            die("raw text decoder: case %zu decoded %ld deltas, %zu bytes", i, t.deltas, t.len);
        free(t.p);
    }
    static const char *bad[] = {"{\"delta\":{\"content\":\"\\x\"}}", "{\"delta\":{\"content\":\"\\ud83d\"}}",
                                "{\"delta\":{\"content\":\"open"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        text_t t = {0};
        text_room(&t, 1);
        const char *c = strstr(bad[i], "\"content\":") + 10;
        if (json_string_append(&t, c, bad[i] + strlen(bad[i])))
            die("raw text decoder: bad string %zu accepted", i);
        free(t.p);
    }
}

/* raw_exchange, but reading inside each `data:` line: appends every delta's text to t. Returns
 * the number of `data:` lines, counted as raw_exchange counts them. */
static long raw_exchange_text(raw_t *r, const char *req, size_t len, text_t *t) {
    size_t body_len;
    size_t head = raw_send_read(r, req, len, &body_len);
    long lines = 0;
    const char *p = r->buf + head, *end = p + body_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;
        if (nl - p >= 5 && memcmp(p, "data:", 5) == 0) {
            lines++;
            const char *e = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
            sse_data_text(t, p + 5, e);
        }
        p = nl + 1;
    }
    return lines;
}

/* ------------------------------------------------------------------ the hyper floor */

/* Starts `path` as a child that reads commands on its stdin (`*to`) and answers on its stdout
 * (`*from`), killed with the bench; `quiet` sends its stderr to /dev/null. */
static pid_t spawn_piped(const char *path, int quiet, FILE **to, FILE **from) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (quiet) {
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) dup2(null, 2);
        }
        close(in[1]);
        close(out[0]);
        execl(path, path, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *to = fdopen(in[1], "w");
    *from = fdopen(out[0], "r");
    if (!*to || !*from) die("fdopen");
    return pid;
}

/* The realistic floor: bench/hyper-floor, a minimal hyper 1.x client, run once as a persistent
 * child (one command a line on its stdin, one answer a line on its stdout), so its process
 * start is not measured. Without the binary its rows are skipped. */
static FILE *g_hf_to, *g_hf_from;

typedef struct {
    double wall_us, cpu_us;
    long lines;
} hyper_answer_t;

static int hyper_start(void) {
    if (!g_hyper[0] || access(g_hyper, X_OK) != 0) {
        printf("hyper floor: no binary (%s): its rows are skipped\n",
               g_hyper[0] ? g_hyper : "no --hyper-floor given");
        return 0;
    }
    spawn_piped(g_hyper, 0, &g_hf_to, &g_hf_from);
    return 1;
}

/* `run ADDR FILE N TEXT` (N replays of the file on one connection) or, with n == 0,
 * `fresh ADDR FILE TEXT` (its first request on a new connection). */
static hyper_answer_t hyper_ask(const mock_t *m, const bodies_t *req, int n, const char *text) {
    if (n > 0)
        fprintf(g_hf_to, "run 127.0.0.1:%d %s %d %s\n", m->port, req->path, n, text);
    else
        fprintf(g_hf_to, "fresh 127.0.0.1:%d %s %s\n", m->port, req->path, text);
    fflush(g_hf_to);
    char line[512];
    if (!fgets(line, sizeof line, g_hf_from)) die("hyper floor: the child closed");
    double wall_ns, cpu_ns;
    long lines;
    if (sscanf(line, "ok %lf %ld %lf", &wall_ns, &lines, &cpu_ns) != 3) die("hyper floor: %s", line);
    hyper_answer_t a = {wall_ns / 1e3, cpu_ns / 1e3, lines};
    return a;
}

/* FNV-1a 64 of `len` bytes continuing from `h` (start: FNV_START): the hyper floor's `text`
 * command answers its decoded text's, so the text is checked without crossing the pipe. */
#define FNV_START 0xcbf29ce484222325ULL
static uint64_t fnv1a64(uint64_t h, const char *p, size_t len) {
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h;
}

typedef struct {
    double wall_us, cpu_us;
    long lines, deltas, bytes;
    uint64_t hash;
} hyper_text_t;

/* `text ADDR FILE N`: N replays on one new connection, decoding every delta's text (serde_json
 * into a minimal borrowed struct); the answer carries the text's length and FNV-1a 64. */
static hyper_text_t hyper_ask_text(const mock_t *m, const bodies_t *req, int n) {
    fprintf(g_hf_to, "text 127.0.0.1:%d %s %d\n", m->port, req->path, n);
    fflush(g_hf_to);
    char line[512];
    if (!fgets(line, sizeof line, g_hf_from)) die("hyper floor: the child closed");
    double wall_ns, cpu_ns;
    hyper_text_t a = {0};
    unsigned long long hash;
    if (sscanf(line, "ok %lf %ld %lf %ld %ld %llx", &wall_ns, &a.lines, &cpu_ns, &a.deltas,
               &a.bytes, &hash) != 6)
        die("hyper floor (text): %s", line);
    a.wall_us = wall_ns / 1e3;
    a.cpu_us = cpu_ns / 1e3;
    a.hash = hash;
    return a;
}

/* ------------------------------------------------------------------ results */

static sbuf g_json;  /* results.json body */
static sbuf g_table; /* the printed table */
static int g_json_first = 1;

static void json_stat(const char *name, const char *unit, stat_t s) {
    sb_add(&g_json, "%s\n    \"%s\": {\"unit\": \"%s\", \"median\": %.6g, \"p90\": %.6g, \"runs\": %d}",
           g_json_first ? "" : ",", name, unit, s.median, s.p90, s.n);
    g_json_first = 0;
}

static void json_value(const char *name, const char *unit, double v) {
    sb_add(&g_json, "%s\n    \"%s\": {\"unit\": \"%s\", \"value\": %.6g}", g_json_first ? "" : ",",
           name, unit, v);
    g_json_first = 0;
}

static void row(const char *name, const char *unit, stat_t s, const char *target) {
    sb_add(&g_table, "%-44s %14.6g %14.6g  %-10s %s\n", name, s.median, s.p90, unit, target);
    json_stat(name, unit, s);
    printf("%-44s %14.6g %14.6g  %-10s %s\n", name, s.median, s.p90, unit, target);
    fflush(stdout);
}

/* A row "  ratio library/<floor>" from the medians and the p90s of the two. */
static void ratio_row_of(const char *floor_name, const char *what, stat_t lib, stat_t floor_,
                         const char *target) {
    char name[192];
    snprintf(name, sizeof name, "  ratio library/%s, %s", floor_name, what);
    stat_t q = {lib.median / floor_.median, lib.p90 / floor_.p90, lib.n};
    row(name, "x", q, target);
}

static void ratio_row(const char *what, stat_t lib, stat_t floor_, const char *target) {
    ratio_row_of("floor", what, lib, floor_, target);
}

static void hyper_ratio_row(const char *what, stat_t lib, stat_t floor_, const char *target) {
    ratio_row_of("hyper floor", what, lib, floor_, target);
}

/* The median and p90 of lib[j] / floor[j]: each round's library figure over the floor measured
 * right after it. The raw floor moves 5-10x with where the scheduler puts the client and the
 * mock (bench/HISTORY.md, Part 8 (floor)); a round's two figures share that moment, the two
 * medians need not. Call it before stats() sorts either array. */
static stat_t round_ratio(const double *lib, const double *floor_, int n) {
    double *q = calloc((size_t)n, sizeof(double));
    for (int j = 0; j < n; j++) q[j] = lib[j] / floor_[j];
    stat_t s = stats(q, n);
    free(q);
    return s;
}

/* Context switches so far, voluntary + involuntary, of the process (RUSAGE_SELF). */
static double switches(int who) {
    struct rusage u;
    getrusage(who, &u);
    return (double)(u.ru_nvcsw + u.ru_nivcsw);
}

/* This thread's involuntary switches so far. Per raw request they tell the floor's mode: ~0.5
 * when the mock runs on the client's CPU (woken by the request, it preempts the client; the
 * mock's busy interval then holds some of the client's time, and wall - busy under-reads), 0
 * when they run on two CPUs (each wake-up then crosses vCPUs, and wall - busy holds its
 * latency). */
static double preempted(void) {
    struct rusage u;
    getrusage(RUSAGE_THREAD, &u);
    return (double)u.ru_nivcsw;
}

/* ------------------------------------------------------------------ host tools and the FS vtable */

#define HT_CALLS 50

/* A host tool answering at once; it times itself so that its own time can be subtracted. */
static double g_cb_s;
static void ht_execute(void *ud, const char *args, const agentao_tool_call *call, agentao_reply *reply) {
    (void)ud, (void)args, (void)call;
    double t0 = now_s();
    agentao_reply_tool_result(reply, "ok", NULL);
    g_cb_s += now_s() - t0;
}

/* One response with `calls` calls to bench_tool (distinct arguments), then a final text. */
static char *script_host_tool(int calls) {
    sbuf b = {0};
    sb_add(&b, "{\"responses\":[{\"tool_calls\":[");
    for (int c = 1; c <= calls; c++)
        sb_add(&b, "%s{\"id\":\"h%d\",\"name\":\"bench_tool\",\"arguments\":{\"k\":%d}}", c > 1 ? "," : "", c, c);
    sb_add(&b, "]},{\"text\":\"done\"}]}");
    return b.p;
}

/* An in-memory file system answering every read with the same small text. */
static const char VFS_TEXT[] = "line one of file\nline two\nline three\n";
static int32_t vfs_read(void *ud, const char *path, uint64_t max_bytes, agentao_fs_out *out) {
    (void)ud, (void)path;
    size_t len = sizeof VFS_TEXT - 1 < max_bytes ? sizeof VFS_TEXT - 1 : (size_t)max_bytes;
    agentao_fs_out_set_data(out, (const uint8_t *)VFS_TEXT, len, NULL);
    return 0;
}
static int32_t vfs_stat(void *ud, const char *path, agentao_fs_out *out) {
    (void)ud;
    if (strcmp(path, g_ws) == 0) agentao_fs_out_set_stat(out, 0, 1000.0, AGENTAO_FS_KIND_DIR, NULL);
    else agentao_fs_out_set_stat(out, sizeof VFS_TEXT - 1, 1000.0, AGENTAO_FS_KIND_FILE, NULL);
    return 0;
}
static bool vfs_exists(void *ud, const char *path) { return (void)ud, (void)path, true; }

/* Wall time of one turn on a fresh agent (creation not timed: the script is consumed), minus
 * the host tool's own time, in seconds; `h` sums the tools' own durations (tool_complete). */
static double timed_turn(const char *script, int host_tool, int vfs, host_t *h) {
    char *cfg = config_scripted(script);
    agentao_agent *a = agent_new(cfg, h);
    host_reset(h);
    free(cfg);
    agentao_error *err = NULL;
    if (host_tool) {
        agentao_tool_desc d = {
            .struct_size = sizeof d,
            .name = "bench_tool",
            .description = "answers ok",
            .parameters_json = "{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"integer\"}}}",
            .is_read_only = true,
            .execute = ht_execute,
        };
        check(agentao_agent_add_tool(a, &d, false, &err), err, "add_tool");
    }
    if (vfs) {
        agentao_file_system fs = {.struct_size = sizeof fs, .read = vfs_read, .stat = vfs_stat, .exists = vfs_exists};
        check(agentao_agent_set_file_system(a, &fs, &err), err, "set_file_system");
    }
    g_cb_s = 0;
    char *text = NULL;
    double t0 = now_s();
    check(agentao_agent_chat(a, "go", -1, NULL, &text, &err), err, "timed turn");
    double t = now_s() - t0 - g_cb_s;
    if (!text || (strcmp(text, "done") != 0 && strcmp(text, "loop done") != 0)) die("timed turn: unexpected answer");
    agentao_string_free(text);
    agentao_agent_free(a);
    return t;
}

static void bench_host_tool(void) {
    int warm = 3, runs = g_quick ? 11 : 41;
    double *v = calloc((size_t)runs, sizeof(double));
    host_t h;
    host_init(&h);

    /* The same turn with 1 and with HT_CALLS + 1 calls in one batch (read-only, not re-entrant:
     * run one after another); the difference per call is what a host-tool call costs beyond
     * its callback: dispatch, permission, events, history. */
    char *one = script_host_tool(1), *many = script_host_tool(HT_CALLS + 1);
    for (int i = 0; i < warm + runs; i++) {
        double t1 = timed_turn(one, 1, 0, &h);
        double tn = timed_turn(many, 1, 0, &h);
        if (i >= warm) v[i - warm] = (tn - t1) * 1e6 / HT_CALLS;
    }
    row("host-tool call, overhead beyond callback", "us", stats(v, runs), "< 10 us");
    free(one);
    free(many);

    /* HT_CALLS read_file iterations on the local disk and through an in-memory FileSystem
     * vtable, alternating; the difference of read_file's own time (its tool_complete
     * durations, so the loop's noise stays out) per read is the vtable's cost. */
    char *loop = script_tool_loop(HT_CALLS, "loop done");
    for (int i = 0; i < warm + runs; i++) {
        timed_turn(loop, 0, 0, &h);
        double local = h.tool_ms;
        timed_turn(loop, 0, 1, &h);
        double vt = h.tool_ms;
        if (i >= warm) v[i - warm] = (vt - local) * 1e3 / HT_CALLS;
    }
    row("FS-vtable read_file minus local, own time", "us", stats(v, runs), "< 2 us");
    free(loop);
    free(v);
}

/* ------------------------------------------------------------------ 1. per-turn overhead */

#define TURN_BATCH 10

static void chat_or_die(agentao_agent *a, const char *prompt) {
    char *text = NULL;
    agentao_error *err = NULL;
    check(agentao_agent_chat(a, prompt, -1, NULL, &text, &err), err, "capture turn");
    agentao_string_free(text);
}
static void capture_hi(agentao_agent *a) { chat_or_die(a, "hi"); }
static void capture_loop(agentao_agent *a) { chat_or_die(a, "loop"); }
static void capture_go(agentao_agent *a) { chat_or_die(a, "go"); }


static void bench_turn(void) {
    int warm = g_quick ? 10 : 50, runs = g_quick ? 50 : 400;
    double *v = calloc((size_t)runs, sizeof(double));
    host_t h;
    host_init(&h);

    /* scripted */
    char script[256];
    snprintf(script, sizeof script, "{\"responses\":[],\"exhausted\":{\"text\":\"%s\"}}", ONE_TEXT);
    char *cfg = config_scripted(script);
    agentao_agent *a = agent_new(cfg, &h);
    for (int i = 0; i < warm + runs; i++) {
        reset_history(a);
        char *text = NULL;
        agentao_error *err = NULL;
        double t0 = now_s();
        check(agentao_agent_chat(a, "hi", -1, NULL, &text, &err), err, "chat");
        double t1 = now_s();
        if (!text || strcmp(text, ONE_TEXT) != 0) die("scripted turn: unexpected answer");
        agentao_string_free(text);
        if (i >= warm) v[i - warm] = (t1 - t0) * 1e6;
    }
    row("turn overhead, scripted (agentao_agent_chat)", "us", stats(v, runs), "< 50 us");
    agentao_agent_free(a);
    free(cfg);

    /* mock: TURN_BATCH turns between two reads of the server's time, each turn timed alone
     * (the history reset between them is not); then the raw client replays the same request
     * TURN_BATCH times on its keep-alive connection between the next two reads. Both sides
     * thus start right after a /v1/_stats connection once per batch, and run back to back
     * otherwise, as the tool loop's requests do. */
    snprintf(script, sizeof script, "{\"responses\":[{\"text\":\"%s\"}]}", ONE_TEXT);
    bodies_t req = capture_requests(script, capture_hi);
    mock_t m = mock_start(script);
    raw_t raw = raw_open(&m);
    int bruns = runs / TURN_BATCH, bwarm = warm / TURN_BATCH + 1;
    double *fl = calloc((size_t)bruns, sizeof(double));
    double *fh = calloc((size_t)bruns, sizeof(double));
    double *fhc = calloc((size_t)bruns, sizeof(double));
    int hyper = g_hf_to != NULL;
    cfg = config_openai(m.base_url);
    a = agent_new(cfg, &h);
    double server_sum = 0;
    double *wall = calloc((size_t)bruns, sizeof(double));
    /* What tells the floor's two modes apart (bench/HISTORY.md, Part 8 (floor)): the raw
     * client's own CPU time and involuntary switches per request (preempted()), and the library
     * process's switches. */
    double *fcpu = calloc((size_t)bruns, sizeof(double));
    double *fsw = calloc((size_t)bruns, sizeof(double));
    double *lsw = calloc((size_t)bruns, sizeof(double));
    double *lcpu = calloc((size_t)bruns, sizeof(double));
    for (int i = 0; i < bwarm + bruns; i++) {
        double lib_wall = 0;
        double b0 = mock_busy_ns(&m);
        double ls0 = switches(RUSAGE_SELF), lc0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int k = 0; k < TURN_BATCH; k++) {
            reset_history(a);
            char *text = NULL;
            agentao_error *err = NULL;
            double t0 = now_s();
            check(agentao_agent_chat(a, "hi", -1, NULL, &text, &err), err, "chat (mock)");
            lib_wall += now_s() - t0;
            if (!text || strcmp(text, ONE_TEXT) != 0) die("mock turn: unexpected answer");
            agentao_string_free(text);
        }
        double lc1 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), ls1 = switches(RUSAGE_SELF);
        double b1 = mock_busy_ns(&m);
        double rs0 = preempted(), rc0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        double r0 = now_s();
        for (int k = 0; k < TURN_BATCH; k++) raw_exchange(&raw, req.req[0], req.len[0]);
        double r1 = now_s();
        double rc1 = cpu_s(CLOCK_THREAD_CPUTIME_ID), rs1 = preempted();
        double b2 = mock_busy_ns(&m);
        hyper_answer_t ha = {0};
        if (hyper) ha = hyper_ask(&m, &req, TURN_BATCH, ONE_TEXT);
        double b3 = hyper ? mock_busy_ns(&m) : b2;
        if (i >= bwarm) {
            int j = i - bwarm;
            fl[j] = ((r1 - r0) * 1e6 - (b2 - b1) / 1e3) / TURN_BATCH;
            fh[j] = (ha.wall_us - (b3 - b2) / 1e3) / TURN_BATCH;
            v[j] = (lib_wall * 1e6 - (b1 - b0) / 1e3) / TURN_BATCH;
            wall[j] = lib_wall * 1e6 / TURN_BATCH;
            server_sum += (b1 - b0) / 1e3 / TURN_BATCH;
            fcpu[j] = (rc1 - rc0) * 1e6 / TURN_BATCH;
            fsw[j] = (rs1 - rs0) / TURN_BATCH;
            lsw[j] = (ls1 - ls0) / TURN_BATCH;
            lcpu[j] = (lc1 - lc0) * 1e6 / TURN_BATCH;
            fhc[j] = ha.cpu_us / TURN_BATCH;
        }
    }
    stat_t per_round = round_ratio(v, fl, bruns), hper_round = {0};
    stat_t cpu_round = round_ratio(lcpu, fcpu, bruns), hcpu_round = {0};
    if (hyper) hper_round = round_ratio(v, fh, bruns), hcpu_round = round_ratio(lcpu, fhc, bruns);
    stat_t lib = stats(v, bruns), flo = stats(fl, bruns);
    row("turn overhead, mock (wall - server)", "us", lib, "< 50 us");
    row("  floor: raw client, same request", "us", flo, "");
    ratio_row("turn", lib, flo, "<= 3");
    row("  ratio library/floor per round, turn", "x", per_round, "<= 3");
    /* CPU time: neither a wake-up's latency nor the mock's busy interval enters it. */
    row("turn CPU time, mock (library process)", "us", stats(lcpu, bruns), "");
    row("  floor: raw client CPU time, same request", "us", stats(fcpu, bruns), "");
    row("  ratio library/floor CPU time per round, turn", "x", cpu_round, "");
    row("  floor: raw client preempted/request (mode)", "n", stats(fsw, bruns), "");
    row("  library context switches/turn, mock", "n", stats(lsw, bruns), "");
    if (hyper) {
        stat_t fhs = stats(fh, bruns);
        row("  floor: hyper client, same request", "us", fhs, "");
        hyper_ratio_row("turn", lib, fhs, "");
        row("  ratio library/hyper floor per round, turn", "x", hper_round, "");
        row("  floor: hyper client CPU time, same request", "us", stats(fhc, bruns), "");
        row("  ratio library/hyper floor CPU time per round, turn", "x", hcpu_round, "");
    }
    row("  turn wall time, mock", "us", stats(wall, bruns), "");
    json_value("  server time per turn, mock (mean)", "us", server_sum / bruns);
    printf("%-44s %14.6g %14s  us\n", "  server time per turn, mock (mean)", server_sum / bruns, "");
    sb_add(&g_table, "%-44s %14.6g %14s  us\n", "  server time per turn, mock (mean)",
           server_sum / bruns, "");
    free(fcpu);
    free(fsw);
    free(lsw);
    free(lcpu);
    free(fhc);

    /* A fresh agent's first turn (its connection is opened in it) against its second, each
     * right after a /v1/_stats connection, minus the server's time. */
    int fruns = g_quick ? 10 : 40;
    double *first = calloc((size_t)fruns, sizeof(double));
    double *second = calloc((size_t)fruns, sizeof(double));
    double *hfirst = calloc((size_t)fruns, sizeof(double));
    for (int i = 0; i < fruns + 2; i++) {
        agentao_agent *f = agent_new(cfg, &h);
        double t[2];
        for (int k = 0; k < 2; k++) {
            reset_history(f);
            char *text = NULL;
            agentao_error *err = NULL;
            double b0 = mock_busy_ns(&m);
            double t0 = now_s();
            check(agentao_agent_chat(f, "hi", -1, NULL, &text, &err), err, "first turn (mock)");
            double t1 = now_s();
            double b1 = mock_busy_ns(&m);
            if (!text || strcmp(text, ONE_TEXT) != 0) die("first turn: unexpected answer");
            agentao_string_free(text);
            t[k] = (t1 - t0) * 1e6 - (b1 - b0) / 1e3;
        }
        agentao_agent_free(f);
        double hb0 = mock_busy_ns(&m);
        hyper_answer_t ha = {0};
        if (hyper) ha = hyper_ask(&m, &req, 0, ONE_TEXT);
        double hb1 = hyper ? mock_busy_ns(&m) : hb0;
        if (i >= 2) {
            first[i - 2] = t[0];
            second[i - 2] = t[1];
            hfirst[i - 2] = ha.wall_us - (hb1 - hb0) / 1e3;
        }
    }
    /* The agents above free theirs before the next is made, so each first turn takes the
     * connection its predecessor left in the pool. Here they stay alive until the end: each
     * first turn connects anew (the first one takes the pooled connection; not counted). */
    agentao_agent **alive = calloc((size_t)fruns + 2, sizeof *alive);
    double *nfirst = calloc((size_t)fruns, sizeof(double));
    for (int i = 0; i < fruns + 2; i++) {
        alive[i] = agent_new(cfg, &h);
        reset_history(alive[i]);
        char *text = NULL;
        agentao_error *err = NULL;
        double b0 = mock_busy_ns(&m);
        double t0 = now_s();
        check(agentao_agent_chat(alive[i], "hi", -1, NULL, &text, &err), err,
              "first turn, new connection (mock)");
        double t1 = now_s();
        double b1 = mock_busy_ns(&m);
        if (!text || strcmp(text, ONE_TEXT) != 0) die("first turn: unexpected answer");
        agentao_string_free(text);
        if (i >= 2) nfirst[i - 2] = (t1 - t0) * 1e6 - (b1 - b0) / 1e3;
    }
    for (int i = 0; i < fruns + 2; i++) agentao_agent_free(alive[i]);
    free(alive);
    stat_t sf = stats(first, fruns), ss = stats(second, fruns), nf = stats(nfirst, fruns);
    row("fresh agent's first turn, pooled connection", "us", sf, "");
    row("  its second turn, mock (wall - server)", "us", ss, "");
    stat_t fr = {sf.median / ss.median, sf.p90 / ss.p90, fruns};
    row("  ratio first/second turn", "x", fr, "<= 1.5");
    row("fresh agent's first turn, new connection", "us", nf, "");
    stat_t nr = {nf.median / ss.median, nf.p90 / ss.p90, fruns};
    row("  ratio new-connection first/second turn", "x", nr, "");
    if (hyper) {
        stat_t hf = stats(hfirst, fruns);
        row("  floor: hyper client, fresh connection", "us", hf, "");
        hyper_ratio_row("new-connection first turn", nf, hf, "");
    }
    free(nfirst);
    free(hfirst);
    free(fh);
    free(first);
    free(second);
    agentao_agent_free(a);
    free(cfg);
    raw_close(&raw);
    mock_stop(&m);
    bodies_free(&req);
    free(v);
    free(wall);
    free(fl);
}

/* ------------------------------------------------------------------ 2. streaming */

#define STREAM_CHUNKS 20000

static void stream_runs(agentao_agent *a, host_t *h, mock_t *m, const bodies_t *req, int warm,
                        int runs, const char *label_provider, int chunk) {
    double *rate = calloc((size_t)runs, sizeof(double));
    double *wall_rate = calloc((size_t)runs, sizeof(double));
    double *cpu_per = calloc((size_t)runs, sizeof(double));
    double *floor_rate = calloc((size_t)runs, sizeof(double));
    double *floor_cpu = calloc((size_t)runs, sizeof(double));
    double *hyper_rate = calloc((size_t)runs, sizeof(double));
    double *hyper_cpu = calloc((size_t)runs, sizeof(double));
    /* The decoding floors: the deltas' text itself, not only line ends (sse_data_text). */
    double *text_rate = calloc((size_t)runs, sizeof(double));
    double *text_cpu = calloc((size_t)runs, sizeof(double));
    double *htext_rate = calloc((size_t)runs, sizeof(double));
    double *htext_cpu = calloc((size_t)runs, sizeof(double));
    int hyper = req && g_hf_to;
    raw_t raw = {-1, 0, NULL, 0};
    if (req) raw = raw_open(m);
    /* What the mock streams: the chunk's letters, STREAM_CHUNKS times (script_text_stream). */
    size_t expect_len = (size_t)chunk * STREAM_CHUNKS;
    char *expect = malloc(expect_len);
    if (!expect) die("out of memory");
    for (size_t k = 0; k < expect_len; k++) expect[k] = (char)('a' + (int)(k % (size_t)chunk));
    uint64_t expect_hash = fnv1a64(FNV_START, expect, expect_len);
    text_t text = {0};
    double *ttfd = calloc((size_t)runs, sizeof(double));
    double *emits = calloc((size_t)runs, sizeof(double));
    for (int i = 0; i < warm + runs; i++) {
        reset_history(a);
        host_reset(h);
        agentao_error *err = NULL;
        double b0 = m ? mock_busy_ns(m) : 0;
        double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        double t0 = now_s();
        check(agentao_agent_stream(a, "go", -1, NULL, on_delta, on_done, h, &err), err, "stream");
        host_wait(h);
        double c1 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        double b1 = m ? mock_busy_ns(m) : 0;
        if (h->status != AGENTAO_STATUS_OK) die("stream turn failed: %s", agentao_status_name(h->status));
        long nd = atomic_load(&h->deltas);
        if (nd != STREAM_CHUNKS) die("stream: %ld deltas, expected %d", nd, STREAM_CHUNKS);
        double secs = (h->t_done - t0) - (b1 - b0) * 1e-9;
        if (req) {
            /* The server's busy time includes its writes blocked on a full socket (it
             * writes the whole body at once), so it is not subtracted here: both sides are
             * compared by wall time against the same server, and by their own CPU time (the
             * raw client runs on this thread; the library on its threads of this process). */
            double rc0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
            double r0 = now_s();
            long lines = raw_exchange(&raw, req->req[0], req->len[0]);
            double r1 = now_s();
            double rc1 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
            /* the deltas, the finish and usage chunks, [DONE] */
            if (lines < STREAM_CHUNKS) die("raw stream: %ld data lines", lines);
            if (i >= warm) {
                floor_rate[i - warm] = (double)lines / (r1 - r0);
                floor_cpu[i - warm] = (rc1 - rc0) * 1e6 / (double)lines;
            }
            if (hyper) {
                hyper_answer_t ha = hyper_ask(m, req, 1, "-");
                if (ha.lines < STREAM_CHUNKS) die("hyper stream: %ld data lines", ha.lines);
                if (i >= warm) {
                    hyper_rate[i - warm] = (double)ha.lines / (ha.wall_us * 1e-6);
                    hyper_cpu[i - warm] = ha.cpu_us / (double)ha.lines;
                }
            }
            /* Per delta, as the library's deltas/s: the text of every data line, checked. */
            text.len = 0;
            text.deltas = 0;
            rc0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
            r0 = now_s();
            raw_exchange_text(&raw, req->req[0], req->len[0], &text);
            r1 = now_s();
            rc1 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
            if (text.deltas != STREAM_CHUNKS || text.len != expect_len ||
                memcmp(text.p, expect, expect_len) != 0)
                die("raw text: %ld deltas, %zu bytes: not the mock's text", text.deltas, text.len);
            if (i >= warm) {
                text_rate[i - warm] = (double)text.deltas / (r1 - r0);
                text_cpu[i - warm] = (rc1 - rc0) * 1e6 / (double)text.deltas;
            }
            if (hyper) {
                hyper_text_t ht = hyper_ask_text(m, req, 1);
                if (ht.deltas != STREAM_CHUNKS || (size_t)ht.bytes != expect_len ||
                    ht.hash != expect_hash)
                    die("hyper text: %ld deltas, %ld bytes: not the mock's text", ht.deltas,
                        ht.bytes);
                if (i >= warm) {
                    htext_rate[i - warm] = (double)ht.deltas / (ht.wall_us * 1e-6);
                    htext_cpu[i - warm] = ht.cpu_us / (double)ht.deltas;
                }
            }
        }
        if (i >= warm) {
            rate[i - warm] = (double)nd / secs;
            wall_rate[i - warm] = (double)nd / (h->t_done - t0);
            cpu_per[i - warm] = (c1 - c0) * 1e6 / (double)nd;
            ttfd[i - warm] = (h->t_first_delta - t0) * 1e6;
            emits[i - warm] = (double)atomic_load(&h->emits);
        }
    }
    char name[128];
    snprintf(name, sizeof name, "deltas/s, %s, %d-char chunks", label_provider, chunk);
    stat_t lib = stats(rate, runs);
    row(name, "deltas/s", lib, "> 1e6/s");
    if (req) {
        stat_t wall = stats(wall_rate, runs), flo = stats(floor_rate, runs);
        snprintf(name, sizeof name, "  deltas/s by wall time, mock, %d-char", chunk);
        row(name, "deltas/s", wall, "");
        snprintf(name, sizeof name, "  floor: raw client SSE lines/s, %d-char", chunk);
        row(name, "lines/s", flo, "");
        snprintf(name, sizeof name, "deltas/s vs SSE lines/s, %d-char", chunk);
        ratio_row(name, wall, flo, ">= 0.7");
        snprintf(name, sizeof name, "  CPU per delta, mock, %d-char", chunk);
        row(name, "us", stats(cpu_per, runs), "<= 0.6 us");
        snprintf(name, sizeof name, "  floor: raw client CPU per SSE line, %d-char", chunk);
        row(name, "us", stats(floor_cpu, runs), "");
        if (hyper) {
            stat_t hr = stats(hyper_rate, runs);
            snprintf(name, sizeof name, "  floor: hyper client SSE lines/s, %d-char", chunk);
            row(name, "lines/s", hr, "");
            snprintf(name, sizeof name, "deltas/s vs hyper SSE lines/s, %d-char", chunk);
            hyper_ratio_row(name, wall, hr, "");
            snprintf(name, sizeof name, "  floor: hyper client CPU per SSE line, %d-char", chunk);
            row(name, "us", stats(hyper_cpu, runs), "");
        }
        /* The rows above only find line ends; these decode each delta's text as the library
         * must, so "vs decoded deltas/s" is the like-for-like ratio of the two. */
        stat_t tr = stats(text_rate, runs);
        snprintf(name, sizeof name, "  floor: raw client decoding text, deltas/s, %d-char", chunk);
        row(name, "deltas/s", tr, "");
        snprintf(name, sizeof name, "deltas/s vs decoded deltas/s, %d-char", chunk);
        ratio_row_of("raw text floor", name, wall, tr, "");
        snprintf(name, sizeof name, "  floor: raw client CPU per decoded delta, %d-char", chunk);
        row(name, "us", stats(text_cpu, runs), "");
        if (hyper) {
            stat_t htr = stats(htext_rate, runs);
            snprintf(name, sizeof name, "  floor: hyper client decoding text, deltas/s, %d-char",
                     chunk);
            row(name, "deltas/s", htr, "");
            snprintf(name, sizeof name, "deltas/s vs decoded deltas/s, %d-char", chunk);
            ratio_row_of("hyper text floor", name, wall, htr, "");
            snprintf(name, sizeof name, "  floor: hyper client CPU per decoded delta, %d-char",
                     chunk);
            row(name, "us", stats(htext_cpu, runs), "");
        }
        raw_close(&raw);
    }
    free(text.p);
    free(expect);
    free(text_rate);
    free(text_cpu);
    free(htext_rate);
    free(htext_cpu);
    free(hyper_rate);
    free(hyper_cpu);
    free(floor_rate);
    free(floor_cpu);
    free(wall_rate);
    free(cpu_per);
    snprintf(name, sizeof name, "  time to first delta, %s, %d-char", label_provider, chunk);
    row(name, "us", stats(ttfd, runs), "");
    snprintf(name, sizeof name, "  emit calls per turn, %s, %d-char", label_provider, chunk);
    row(name, "calls", stats(emits, runs), "");
    free(rate);
    free(ttfd);
    free(emits);
}

static void bench_stream(void) {
    int warm = 1, runs = g_quick ? 3 : 7;
    sse_data_text_selftest();
    static const int sizes[3] = {1, 4, 16};
    host_t h;
    host_init(&h);
    for (int s = 0; s < 3; s++) {
        char *script = script_text_stream(STREAM_CHUNKS, sizes[s], 0);
        bodies_t req = capture_requests(script, capture_go);
        mock_t m = mock_start(script);
        char *cfg = config_openai(m.base_url);
        agentao_agent *a = agent_new(cfg, &h);
        stream_runs(a, &h, &m, &req, warm, runs, "mock", sizes[s]);
        bodies_free(&req);
        agentao_agent_free(a);
        mock_stop(&m);
        free(cfg);
        free(script);

        script = script_text_stream(STREAM_CHUNKS, sizes[s], 1);
        cfg = config_scripted(script);
        a = agent_new(cfg, &h);
        stream_runs(a, &h, NULL, NULL, warm, runs, "scripted", sizes[s]);
        agentao_agent_free(a);
        free(cfg);
        free(script);
    }
}

/* ------------------------------------------------------------------ 3. tool loop */

#define LOOP_ITERS 20

static void bench_tool_loop(void) {
    int warm = 2, runs = g_quick ? 5 : 15;
    double *v = calloc((size_t)runs, sizeof(double));
    double *tools = calloc((size_t)runs, sizeof(double));
    host_t h;
    host_init(&h);
    char *script = script_tool_loop(LOOP_ITERS, "loop done");

    /* scripted: the script is consumed, so a fresh agent per run (creation not timed) */
    char *cfg = config_scripted(script);
    for (int i = 0; i < warm + runs; i++) {
        agentao_agent *a = agent_new(cfg, &h);
        host_reset(&h);
        char *text = NULL;
        agentao_error *err = NULL;
        double t0 = now_s();
        check(agentao_agent_chat(a, "loop", -1, NULL, &text, &err), err, "tool loop");
        double t1 = now_s();
        if (!text || strcmp(text, "loop done") != 0) die("tool loop: unexpected answer");
        agentao_string_free(text);
        agentao_agent_free(a);
        if (i >= warm) {
            v[i - warm] = ((t1 - t0) * 1e6 - h.tool_ms * 1e3) / LOOP_ITERS;
            tools[i - warm] = h.tool_ms * 1e3 / LOOP_ITERS;
        }
    }
    row("tool-loop overhead/iteration, scripted", "us", stats(v, runs), "< 50 us");
    row("  tool's own time/iteration, scripted", "us", stats(tools, runs), "");
    free(cfg);

    /* mock: body k answers a request carrying k tool results; the raw client replays the
     * library's LOOP_ITERS + 1 requests of the turn */
    bodies_t req = capture_requests(script, capture_loop);
    if (req.n != LOOP_ITERS + 1) die("tool loop: captured %d requests", req.n);
    mock_t m = mock_start(script);
    raw_t raw = raw_open(&m);
    double *fl = calloc((size_t)runs, sizeof(double));
    double *fh = calloc((size_t)runs, sizeof(double));
    double *fcpu = calloc((size_t)runs, sizeof(double));
    double *fsw = calloc((size_t)runs, sizeof(double));
    double *lsw = calloc((size_t)runs, sizeof(double));
    double *lcpu = calloc((size_t)runs, sizeof(double));
    double *fhc = calloc((size_t)runs, sizeof(double));
    int hyper = g_hf_to != NULL;
    cfg = config_openai(m.base_url);
    agentao_agent *a = agent_new(cfg, &h);
    for (int i = 0; i < warm + runs; i++) {
        reset_history(a);
        host_reset(&h);
        char *text = NULL;
        agentao_error *err = NULL;
        double b0 = mock_busy_ns(&m);
        double ls0 = switches(RUSAGE_SELF), lc0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        double t0 = now_s();
        check(agentao_agent_chat(a, "loop", -1, NULL, &text, &err), err, "tool loop (mock)");
        double t1 = now_s();
        double lc1 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), ls1 = switches(RUSAGE_SELF);
        double b1 = mock_busy_ns(&m);
        if (!text || strcmp(text, "loop done") != 0) die("tool loop (mock): unexpected answer");
        agentao_string_free(text);
        double rs0 = preempted(), rc0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        double r0 = now_s();
        for (int k = 0; k < req.n; k++) raw_exchange(&raw, req.req[k], req.len[k]);
        double r1 = now_s();
        double rc1 = cpu_s(CLOCK_THREAD_CPUTIME_ID), rs1 = preempted();
        double b2 = mock_busy_ns(&m);
        hyper_answer_t ha = {0};
        if (hyper) ha = hyper_ask(&m, &req, 1, "loop");
        double b3 = hyper ? mock_busy_ns(&m) : b2;
        if (i >= warm) {
            fl[i - warm] = ((r1 - r0) * 1e6 - (b2 - b1) / 1e3) / LOOP_ITERS;
            fh[i - warm] = (ha.wall_us - (b3 - b2) / 1e3) / LOOP_ITERS;
            v[i - warm] = ((t1 - t0) * 1e6 - h.tool_ms * 1e3 - (b1 - b0) / 1e3) / LOOP_ITERS;
            tools[i - warm] = h.tool_ms * 1e3 / LOOP_ITERS;
            fcpu[i - warm] = (rc1 - rc0) * 1e6 / LOOP_ITERS;
            fsw[i - warm] = (rs1 - rs0) / req.n;
            lsw[i - warm] = (ls1 - ls0) / LOOP_ITERS;
            lcpu[i - warm] = ((lc1 - lc0) * 1e6 - h.tool_ms * 1e3) / LOOP_ITERS;
            fhc[i - warm] = ha.cpu_us / LOOP_ITERS;
        }
    }
    stat_t per_round = round_ratio(v, fl, runs), hper_round = {0};
    stat_t cpu_round = round_ratio(lcpu, fcpu, runs), hcpu_round = {0};
    if (hyper) hper_round = round_ratio(v, fh, runs), hcpu_round = round_ratio(lcpu, fhc, runs);
    stat_t lib = stats(v, runs), flo = stats(fl, runs);
    row("tool-loop overhead/iteration, mock", "us", lib, "< 50 us");
    row("  floor: raw client, same requests", "us", flo, "");
    ratio_row("tool-loop iteration", lib, flo, "<= 3");
    row("  ratio library/floor per round, tool-loop iteration", "x", per_round, "<= 3");
    /* CPU time: neither a wake-up's latency nor the mock's busy interval enters it. */
    row("tool-loop CPU time/iteration, mock (- tools)", "us", stats(lcpu, runs), "");
    row("  floor: raw client CPU time, same requests", "us", stats(fcpu, runs), "");
    row("  ratio library/floor CPU time per round, tool-loop iteration", "x", cpu_round, "");
    row("  floor: raw client preempted/request (mode)", "n", stats(fsw, runs), "");
    row("  library context switches/iteration, mock", "n", stats(lsw, runs), "");
    if (hyper) {
        stat_t fhs = stats(fh, runs);
        row("  floor: hyper client, same requests", "us", fhs, "");
        hyper_ratio_row("tool-loop iteration", lib, fhs, "");
        row("  ratio library/hyper floor per round, tool-loop iteration", "x", hper_round, "");
        row("  floor: hyper client CPU time, same requests", "us", stats(fhc, runs), "");
        row("  ratio library/hyper floor CPU time per round, tool-loop iteration", "x", hcpu_round,
            "");
    }
    free(fh);
    free(fcpu);
    free(fsw);
    free(lsw);
    free(lcpu);
    free(fhc);
    agentao_agent_free(a);
    raw_close(&raw);
    bodies_free(&req);
    free(fl);
    mock_stop(&m);
    free(cfg);
    free(script);
    free(v);
    free(tools);
}

/* ------------------------------------------------------------------ 4. host events */

typedef struct {
    agentao_host_event_stream *s;
    long expected;
    long got;
    double t_last;
} consumer_t;

static void *consume(void *arg) {
    consumer_t *c = arg;
    while (c->got < c->expected) {
        char *ev = NULL;
        agentao_error *err = NULL;
        agentao_status st = agentao_host_event_stream_next(c->s, 5000, &ev, &err);
        if (st != AGENTAO_STATUS_OK) {
            agentao_error_free(err);
            break;
        }
        agentao_string_free(ev); /* the no-op consumer */
        c->got++;
        c->t_last = now_s();
    }
    return NULL;
}

static void bench_host_events(void) {
    int warm = 1, runs = g_quick ? 3 : 7;
    int iters = 5, calls = 100;
    long expected = (long)iters * calls * 3; /* permission decision, started, completed */
    char *script = script_host_events(iters, calls);
    char *cfg = config_scripted(script);
    double *v = calloc((size_t)runs, sizeof(double));
    host_t h;
    host_init(&h);
    for (int i = 0; i < warm + runs; i++) {
        agentao_agent *a = agent_new(cfg, &h);
        host_reset(&h);
        consumer_t c = {0};
        c.expected = expected;
        agentao_error *err = NULL;
        check(agentao_agent_host_events_open(a, NULL, &c.s, &err), err, "host_events_open");
        pthread_t th;
        pthread_create(&th, NULL, consume, &c);
        double t0 = now_s();
        check(agentao_agent_run(a, "events", -1, NULL, on_done, &h, &err), err, "run");
        pthread_join(th, NULL);
        agentao_host_event_stream_free(c.s); /* releases a turn blocked on a full queue */
        host_wait(&h);
        if (c.got != expected) die("host events: got %ld, expected %ld", c.got, expected);
        agentao_agent_free(a);
        if (i >= warm) v[i - warm] = (double)c.got / (c.t_last - t0);
    }
    row("host events/s (pull stream, 1500/turn)", "events/s", stats(v, runs), "");
    free(v);
    free(script);
    free(cfg);
}

/* ------------------------------------------------------------------ children */

/* Finds `key=` in a line of k=v pairs. */
static double kv(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(line, pat);
    if (!p) die("child output lacks %s: %s", key, line);
    return strtod(p + strlen(pat), NULL);
}

/* Runs this program with --child args and returns its one output line. */
static char *run_child(char *const argv[]) {
    int fds[2];
    if (pipe(fds) != 0) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(g_self, argv);
        _exit(127);
    }
    close(fds[1]);
    sbuf b = {0};
    sb_add(&b, " ");
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf - 1)) > 0) {
        buf[n] = 0;
        sb_add(&b, "%s", buf);
    }
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) die("child %s %s failed (status %d)", argv[2], argv[3], st);
    return b.p;
}

#define MEM_STEPS 4

/* child: mem <scripted|openai> <base_url>. Per idle agent: RSS growth and creation time at
 * 1, 100, 10,000 and 100,000 agents (cumulative). */
static int child_mem(const char *provider, const char *base_url) {
    char *cfg = strcmp(provider, "scripted") == 0
                    ? config_scripted("{\"responses\":[],\"exhausted\":{\"text\":\"x\"}}")
                    : config_openai(base_url);
    /* warm-up: the runtime, the shared HTTP client and lazily built statics */
    agentao_agent_free(agent_new(cfg, NULL));
    static const int steps[MEM_STEPS] = {1, 100, 10000, 100000};
    agentao_agent **agents = calloc(100000, sizeof *agents);
    long base = rss_kib();
    int have = 0;
    printf("ok");
    for (int s = 0; s < MEM_STEPS; s++) {
        double t0 = now_s(), c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        for (; have < steps[s]; have++) agents[have] = agent_new(cfg, NULL);
        double t1 = now_s(), c1 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        int made = steps[s] - (s ? steps[s - 1] : 0);
        long r = rss_kib();
        printf(" rss%d=%.3f create%d=%.3f createcpu%d=%.3f", steps[s], (double)(r - base) / steps[s],
               steps[s], (t1 - t0) * 1e6 / made, steps[s], (c1 - c0) * 1e6 / made);
    }
    printf("\n");
    for (int i = 0; i < have; i++) agentao_agent_free(agents[i]);
    free(agents);
    free(cfg);
    return 0;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long done, errors, target;
    double t_last;
    const char *expect;
} scale_t;

static void on_scale_done(void *ud, agentao_status st, const char *outcome, const agentao_error *err) {
    scale_t *s = ud;
    (void)err;
    int bad = st != AGENTAO_STATUS_OK || !outcome || !strstr(outcome, s->expect);
    double t = now_s();
    pthread_mutex_lock(&s->mu);
    s->errors += bad;
    if (++s->done == s->target) {
        s->t_last = t;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
}

/* child: scale <scripted|mock> <N> <runs> <base_url>. N agents each run a three-request turn
 * (read_file, read_file, answer) at the same time. */
static int child_scale(const char *provider, int n, int runs, const char *base_url) {
    raise_nofile();
    char *script = script_tool_loop(2, "scale done");
    char *cfg = strcmp(provider, "scripted") == 0 ? config_scripted(script) : config_openai(base_url);
    agentao_agent_free(agent_new(cfg, NULL)); /* warm-up */
    long base = rss_kib();
    agentao_agent **agents = calloc((size_t)n, sizeof *agents);
    double *wall = calloc((size_t)runs, sizeof(double));
    double *tps = calloc((size_t)runs, sizeof(double));
    long errors = 0, rss_agents = 0;
    scale_t s;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    s.expect = "scale done";
    for (int r = 0; r < runs; r++) {
        for (int i = 0; i < n; i++) agents[i] = agent_new(cfg, NULL);
        if (r == 0) rss_agents = rss_kib() - base;
        s.done = 0;
        s.errors = 0;
        s.target = n;
        double t0 = now_s();
        for (int i = 0; i < n; i++) {
            agentao_error *err = NULL;
            agentao_status st = agentao_agent_run(agents[i], "scale", -1, NULL, on_scale_done, &s, &err);
            if (st != AGENTAO_STATUS_OK) {
                agentao_error_free(err);
                pthread_mutex_lock(&s.mu);
                s.errors++;
                if (++s.done == s.target) s.t_last = now_s();
                pthread_mutex_unlock(&s.mu);
            }
        }
        pthread_mutex_lock(&s.mu);
        while (s.done < s.target) pthread_cond_wait(&s.cv, &s.mu);
        pthread_mutex_unlock(&s.mu);
        wall[r] = (s.t_last - t0) * 1e3;
        tps[r] = n / (s.t_last - t0);
        errors += s.errors;
        for (int i = 0; i < n; i++) agentao_agent_free(agents[i]);
    }
    stat_t w = stats(wall, runs), t = stats(tps, runs);
    long hwm = hwm_kib();
    printf("ok wall_med=%.3f wall_p90=%.3f tps_med=%.3f tps_p90=%.3f errors=%ld hwm=%ld base=%ld "
           "agents_kib=%ld runs=%d\n",
           w.median, w.p90, t.median, t.p90, errors, hwm, base, rss_agents, runs);
    return 0;
}

/* ------------------------------------------------------------------ 5. memory, 6. scale */

static void bench_memory(mock_t *m) {
    int reps = g_quick ? 1 : 3;
    static const char *providers[2] = {"scripted", "openai"};
    static const int ns[MEM_STEPS] = {1, 100, 10000, 100000};
    for (int p = 0; p < 2; p++) {
        double rss[MEM_STEPS][3], cr[MEM_STEPS][3], crc[MEM_STEPS][3];
        for (int r = 0; r < reps; r++) {
            char *argv[] = {g_self, "--child", "mem", (char *)providers[p], m->base_url, NULL};
            char *line = run_child(argv);
            for (int k = 0; k < MEM_STEPS; k++) {
                char key[32];
                snprintf(key, sizeof key, "rss%d", ns[k]);
                rss[k][r] = kv(line, key);
                snprintf(key, sizeof key, "create%d", ns[k]);
                cr[k][r] = kv(line, key);
                snprintf(key, sizeof key, "createcpu%d", ns[k]);
                crc[k][r] = kv(line, key);
            }
            free(line);
        }
        for (int k = 0; k < MEM_STEPS; k++) {
            char name[128];
            int big = ns[k] == 100000;
            snprintf(name, sizeof name, "idle agent RSS, %s, %d agents", providers[p], ns[k]);
            /* 100,000 idle agents within 2 GiB: 20.97 KiB each */
            row(name, "KiB/agent", stats(rss[k], reps), big ? "<= 20.97 KiB (2 GiB)" : "< 64 KiB");
            snprintf(name, sizeof name, "  agent_new time, %s, %d agents", providers[p], ns[k]);
            row(name, "us/agent", stats(cr[k], reps), big ? "<= 20 us" : "< 100 us");
            /* CPU, all threads of the child: the wall time above includes waiting for a core */
            snprintf(name, sizeof name, "  agent_new CPU, %s, %d agents", providers[p], ns[k]);
            row(name, "us/agent", stats(crc[k], reps), "");
        }
    }
}

static stat_t scale_case(const char *provider, int n, int runs, const char *base_url) {
    char ns[32], rs[32];
    snprintf(ns, sizeof ns, "%d", n);
    snprintf(rs, sizeof rs, "%d", runs);
    char *argv[] = {g_self, "--child", "scale", (char *)provider, ns, rs, (char *)base_url, NULL};
    char *line = run_child(argv);
    stat_t w = {kv(line, "wall_med"), kv(line, "wall_p90"), (int)kv(line, "runs")};
    stat_t t = {kv(line, "tps_med"), kv(line, "tps_p90"), w.n};
    double errors = kv(line, "errors"), hwm = kv(line, "hwm"), base = kv(line, "base");
    char name[128];
    snprintf(name, sizeof name, "scale %s %d agents: turns/s", provider, n);
    row(name, "turns/s", t, n == 10000 && strcmp(provider, "scripted") == 0 ? "> 3200/s" : "");
    snprintf(name, sizeof name, "  scale %s %d: wall time", provider, n);
    row(name, "ms", w, "");
    snprintf(name, sizeof name, "  scale %s %d: errors", provider, n);
    stat_t e = {errors, errors, w.n};
    row(name, "count", e, "0");
    snprintf(name, sizeof name, "  scale %s %d: peak RSS", provider, n);
    stat_t h = {hwm / 1024.0, hwm / 1024.0, 1};
    row(name, "MiB", h, "");
    snprintf(name, sizeof name, "  scale %s %d: peak RSS over base/agent", provider, n);
    stat_t pa = {(hwm - base) / n, (hwm - base) / n, 1};
    row(name, "KiB/agent", pa, "linear");
    if (errors != 0) fprintf(stderr, "bench: %s %d: %g errors\n", provider, n, errors);
    free(line);
    return t;
}

static void capture_scale(agentao_agent *a) { chat_or_die(a, "scale"); }

/* The floor of the scale rows: the hyper client making the same turns (the library's three
 * request bodies, replayed in order on one connection each) on n connections at once, against
 * the same mock, `runs` times. */
static void scale_hyper_floor(const mock_t *m, const char *script, int n, int runs, stat_t lib) {
    if (!g_hf_to && !hyper_start()) return;
    bodies_t req = capture_requests(script, capture_scale);
    double *tps = calloc((size_t)runs, sizeof(double));
    for (int r = 0; r < runs; r++) {
        fprintf(g_hf_to, "many 127.0.0.1:%d %s %d\n", m->port, req.path, n);
        fflush(g_hf_to);
        char line[512];
        if (!fgets(line, sizeof line, g_hf_from)) die("hyper floor: the child closed");
        double wall_ns, cpu_ns;
        long lines;
        if (sscanf(line, "ok %lf %ld %lf", &wall_ns, &lines, &cpu_ns) != 3) die("hyper floor (many): %s", line);
        if (lines < (long)n * req.n) die("hyper floor (many): %ld data lines for %d turns", lines, n);
        tps[r] = n / (wall_ns / 1e9);
    }
    char name[128];
    snprintf(name, sizeof name, "  hyper floor, %d connections at once: turns/s", n);
    stat_t f = stats(tps, runs);
    row(name, "turns/s", f, "");
    ratio_row_of("hyper floor", "turns/s at the same concurrency", lib, f, ">= 0.8x");
    free(tps);
    bodies_free(&req);
}

static void bench_scale(void) {
    char *script = script_tool_loop(2, "scale done");
    mock_t m = mock_start(script);
    scale_case("scripted", 1, g_quick ? 5 : 20, m.base_url);
    scale_case("scripted", 100, g_quick ? 3 : 10, m.base_url);
    scale_case("scripted", 1000, g_quick ? 2 : 5, m.base_url);
    scale_case("scripted", 10000, g_quick ? 1 : 3, m.base_url);
    scale_case("mock", 1000, g_quick ? 1 : 3, m.base_url);
    int runs = g_quick ? 1 : 3;
    stat_t lib = scale_case("mock", 10000, runs, m.base_url);
    scale_hyper_floor(&m, script, 10000, runs, lib);
    mock_stop(&m);
    free(script);
}


/* ------------------------------------------------------------------ hooks */

/* The host's hook (agentao_hooks): no opinion, answered inside the call. */
static void noop_hook(void *ud, const agentao_hook_request *req, agentao_reply *reply) {
    (void)ud, (void)req;
    agentao_reply_hook(reply, NULL, NULL);
}

/* One tool loop of LOOP_ITERS read_file calls per run on the scripted provider (a fresh agent
 * per run, creation not timed), with `hooks_json` as the config's `hooks` section ("" for none)
 * and the host's no-op hook when `c_hook`; the wall time per tool call into `v`. */
static void hook_loop_runs(const char *script, const char *hooks_json, int c_hook, int warm,
                           int runs, double *v) {
    host_t h;
    host_init(&h);
    char *cfg = config_scripted(script);
    if (hooks_json[0]) {
        sbuf b = {0};
        sb_add(&b, "{\"working_directory\":\"%s\",\"hooks\":%s,\"llm\":{\"provider\":\"scripted\","
                   "\"script\":%s}}",
               g_ws, hooks_json, script);
        free(cfg);
        cfg = b.p;
    }
    for (int i = 0; i < warm + runs; i++) {
        agentao_agent *a = agent_new(cfg, &h);
        if (c_hook) {
            agentao_hooks hk;
            memset(&hk, 0, sizeof hk);
            hk.struct_size = sizeof hk;
            hk.on_hook = noop_hook;
            agentao_error *err = NULL;
            check(agentao_agent_set_hooks(a, &hk, &err), err, "set hooks");
        }
        host_reset(&h);
        char *text = NULL;
        agentao_error *err = NULL;
        double t0 = now_s();
        check(agentao_agent_chat(a, "loop", -1, NULL, &text, &err), err, "hook loop");
        double t1 = now_s();
        if (!text || strcmp(text, "loop done") != 0) die("hook loop: unexpected answer");
        agentao_string_free(text);
        agentao_agent_free(a);
        if (i >= warm) v[i - warm] = (t1 - t0) * 1e6 / LOOP_ITERS;
    }
    free(cfg);
}

/* What hooks cost a tool call: the same scripted tool loop without hooks (the floor, measured
 * in this run), with one no-op command hook on every PreToolUse (a process per call), and with
 * one C hook (asked at every point: the prompt, each call before and after, the stop). */
static void bench_hooks(void) {
    int warm = 2, runs = g_quick ? 5 : 15;
    double *none = calloc((size_t)runs, sizeof(double));
    double *cmd = calloc((size_t)runs, sizeof(double));
    double *chook = calloc((size_t)runs, sizeof(double));
    double *dcmd = calloc((size_t)runs, sizeof(double));
    double *dc = calloc((size_t)runs, sizeof(double));
    char *script = script_tool_loop(LOOP_ITERS, "loop done");
    const char *noop =
        "{\"PreToolUse\":[{\"matcher\":\"*\",\"hooks\":[{\"type\":\"command\",\"command\":\"true\"}]}]}";
    hook_loop_runs(script, "", 0, warm, runs, none);
    hook_loop_runs(script, noop, 0, warm, runs, cmd);
    hook_loop_runs(script, "", 1, warm, runs, chook);
    stat_t floor_ = stats(none, runs);
    for (int i = 0; i < runs; i++) {
        dcmd[i] = cmd[i] - floor_.median;
        dc[i] = chook[i] - floor_.median;
    }
    row("tool call, scripted, no hooks (floor)", "us", floor_, "");
    row("tool call, scripted, one no-op command hook", "us", stats(cmd, runs), "");
    row("  added by the command hook/call", "us", stats(dcmd, runs), "");
    row("tool call, scripted, one C hook (every point)", "us", stats(chook, runs), "");
    row("  added by the C hook/call", "us", stats(dc, runs), "");
    free(none);
    free(cmd);
    free(chook);
    free(dcmd);
    free(dc);
    free(script);
}

/* ------------------------------------------------------------------ 7. instruction counts */

/* child: cg <turn|loop|stream> <reps> <base_url> <wire>, run under `valgrind --tool=callgrind`:
 * one warm-up turn, then the counters are zeroed, `reps` turns run, and the counts are dumped. */
static int child_callgrind(const char *kind, int reps, const char *base_url, const char *wire) {
    int loop = strcmp(kind, "loop") == 0, stream = strcmp(kind, "stream") == 0;
    char *cfg = config_wire(wire, base_url);
    /* The stream case has the stream bench's host: a no-op emit and on_delta. The turn and
     * loop cases have no transport (every event written for nobody was skipped from Part 10 of
     * bench/HISTORY.md on), or, with BENCH_CALLGRIND_EMIT=1, that host too (a host that hears
     * every event). */
    host_t h;
    host_init(&h);
    const char *emit_env = getenv("BENCH_CALLGRIND_EMIT");
    int listening = stream || (emit_env && strcmp(emit_env, "1") == 0);
    agentao_agent *a = agent_new(cfg, listening ? &h : NULL);
    const char *prompt = loop ? "loop" : "hi";
    const char *expect = loop ? "loop done" : ONE_TEXT;
    for (int i = 0; i < reps + 1; i++) {
        if (i == 1) CALLGRIND_ZERO_STATS;
        reset_history(a);
        agentao_error *err = NULL;
        if (stream) {
            host_reset(&h);
            check(agentao_agent_stream(a, "go", -1, NULL, on_delta, on_done, &h, &err), err,
                  "callgrind stream");
            host_wait(&h);
            if (h.status != AGENTAO_STATUS_OK || atomic_load(&h.deltas) != STREAM_CHUNKS)
                die("callgrind stream: unexpected end");
            continue;
        }
        char *text = NULL;
        check(agentao_agent_chat(a, prompt, -1, NULL, &text, &err), err, "callgrind turn");
        if (!text || strcmp(text, expect) != 0) die("callgrind turn: unexpected answer");
        agentao_string_free(text);
    }
    CALLGRIND_DUMP_STATS;
    agentao_agent_free(a);
    free(cfg);
    printf("ok\n");
    return 0;
}

/* The raw client under callgrind: `reps` replays of the request file on one connection after a
 * warm-up replay, counted between the client requests; `text` decodes every delta's text as
 * the stream section's decoding floor does. Only user space is counted: the kernel's TCP work
 * in write and read, most of this client's time, is not. */
static int child_callgrind_raw(const char *file, int reps, int port, int text) {
    bodies_t req = bodies_read(file);
    mock_t m = {0};
    m.port = port;
    raw_t raw = raw_open(&m);
    text_t t = {0};
    long lines = 0;
    for (int i = 0; i < reps + 1; i++) {
        if (i == 1) CALLGRIND_ZERO_STATS;
        for (int k = 0; k < req.n; k++) {
            t.len = 0;
            lines += text ? raw_exchange_text(&raw, req.req[k], req.len[k], &t)
                          : raw_exchange(&raw, req.req[k], req.len[k]);
        }
    }
    CALLGRIND_DUMP_STATS;
    raw_close(&raw);
    bodies_free(&req);
    free(t.p);
    printf("ok %ld\n", lines);
    return 0;
}

/* The instructions (Ir) of the first dump `<out>.1`: its `totals:` line, the cost since the
 * counters were zeroed. (Its `summary:` line is the whole run's, warm-up and agent creation
 * included: early figures read from it were 1.2-2x too high.) */
static double callgrind_totals(const char *path) {
    char line[512];
    FILE *f = fopen(path, "r");
    if (!f) die("callgrind: no dump %s", path);
    double ir = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "totals:", 7) == 0) {
            ir = strtod(line + 7, NULL);
            break;
        }
    fclose(f);
    if (ir < 0) die("callgrind: no totals in %s", path);
    return ir;
}

static double callgrind_ir(const char *out) {
    char path[700];
    snprintf(path, sizeof path, "%s.1", out);
    return callgrind_totals(path);
}

/* The hyper floor's instructions per replay of `req`: the child has no client requests to zero
 * its counters, so it runs twice under callgrind, with 1 and 1 + reps replays on one connection,
 * and the difference leaves out its start, its connect and the first (warm-up) replay. */
static double callgrind_hyper_per_replay(const mock_t *m, const bodies_t *req, int reps,
                                         const char *out) {
    double ir[2];
    for (int k = 0; k < 2; k++) {
        char path[700], cmd[4096];
        snprintf(path, sizeof path, "%s.hyper%d", out, k);
        snprintf(cmd, sizeof cmd,
                 "printf 'run 127.0.0.1:%d %s %d -\\n' | valgrind --tool=callgrind "
                 "--callgrind-out-file='%s' '%s' >'%s.answer' 2>'%s.log'",
                 m->port, req->path, 1 + k * reps, path, g_hyper, path, path);
        if (system(cmd) != 0) die("callgrind hyper floor run failed: see %s.log", path);
        ir[k] = callgrind_totals(path);
    }
    return (ir[1] - ir[0]) / reps;
}

/* The raw client's instructions per replay of `req` (child_callgrind_raw). */
static double callgrind_raw_per_replay(const mock_t *m, const bodies_t *req, int reps, int text,
                                       const char *out) {
    char path[640], cmd[4096];
    snprintf(path, sizeof path, "%s.raw%s", out, text ? "text" : "");
    snprintf(cmd, sizeof cmd,
             "valgrind --tool=callgrind --callgrind-out-file='%s' '%s' --child cgraw '%s' %d %d %d "
             ">/dev/null 2>'%s.log'",
             path, g_self, req->path, reps, m->port, text, path);
    if (system(cmd) != 0) die("callgrind raw floor run failed: see %s.log", path);
    return callgrind_ir(path) / reps;
}

static void bench_callgrind(void) {
#ifndef HAVE_CALLGRIND
    die("--callgrind needs valgrind (valgrind/callgrind.h was not found at build time)");
#endif
    static const struct {
        const char *kind, *label;
        int reps, per;
    } cases[3] = {{"turn", "instructions per one-request turn, mock", 5, 1},
                  {"loop", "instructions per tool-loop iteration, mock", 2, LOOP_ITERS},
                  {"stream", "instructions per streamed delta, mock, 4-char", 1, STREAM_CHUNKS}};
    char text_script[256];
    snprintf(text_script, sizeof text_script, "{\"responses\":[{\"text\":\"%s\"}]}", ONE_TEXT);
    char *loop_script = script_tool_loop(LOOP_ITERS, "loop done");
    /* BENCH_CALLGRIND_CHARS sets the streamed delta's size (default 4). */
    const char *chars_env = getenv("BENCH_CALLGRIND_CHARS");
    int chars = chars_env && atoi(chars_env) > 0 ? atoi(chars_env) : 4;
    char stream_label[96];
    snprintf(stream_label, sizeof stream_label,
             "instructions per streamed delta, mock, %d-char", chars);
    char *stream_script = script_text_stream(STREAM_CHUNKS, chars, 0);
    const char *scripts[3] = {text_script, loop_script, stream_script};
    int hyper = g_hyper[0] && access(g_hyper, X_OK) == 0;
    if (!hyper) printf("hyper floor: no binary: its instruction counts are skipped\n");
    /* Every wire against the same mock, script and host; the floors replay the chat wire's
     * requests only. BENCH_CALLGRIND_WIRES=openai leaves the typed wires out (a library from
     * before them, loaded for a before/after comparison); =anthropic or =openai-responses runs
     * the chat wire and that one typed wire (a third less time for a typed wire's medians). */
    static const char *const wires[3] = {"openai", "anthropic", "openai-responses"};
    const char *wires_env = getenv("BENCH_CALLGRIND_WIRES");
    int n_wires = wires_env && strcmp(wires_env, "openai") == 0 ? 1 : 3;
    int only_wire = 0; /* one typed wire beside the chat wire (its index), or 0: all of them */
    for (int w = 1; w < 3 && wires_env; w++)
        if (strcmp(wires_env, wires[w]) == 0) only_wire = w;
    double per_wire[3][3] = {{0}};
    static void (*const captures[3])(agentao_agent *) = {capture_hi, capture_loop, capture_go};
    for (int c = 0; c < 3; c++) {
        /* Every case's requests, for the raw client; the hyper floor replays the first two. */
        bodies_t req = capture_requests(scripts[c], captures[c]);
        mock_t m = mock_start(scripts[c]);
        char out[600], reps[16], cmd[4096];
        /* BENCH_CALLGRIND_DIR keeps the profiles (callgrind_annotate DIR/callgrind.loop.1; the
         * typed wires' are callgrind.loop.anthropic.1 and callgrind.loop.openai-responses.1). */
        const char *keep = getenv("BENCH_CALLGRIND_DIR");
        snprintf(reps, sizeof reps, "%d", cases[c].reps);
        for (int w = 0; w < n_wires; w++) {
            if (only_wire && w && w != only_wire) continue;
            snprintf(out, sizeof out, "%s/callgrind.%s%s%s", keep ? keep : g_tmp, cases[c].kind,
                     w ? "." : "", w ? wires[w] : "");
            snprintf(cmd, sizeof cmd,
                     "valgrind --tool=callgrind --callgrind-out-file='%s' '%s' --child cg %s %s %s "
                     "%s >/dev/null 2>'%s.log'",
                     out, g_self, cases[c].kind, reps, m.base_url, wires[w], out);
            if (system(cmd) != 0) die("callgrind run failed: see %s.log", out);
            per_wire[c][w] = callgrind_ir(out) / (cases[c].reps * cases[c].per);
            if (w) {
                char label[160];
                snprintf(label, sizeof label, "%s, %s", c == 2 ? stream_label : cases[c].label,
                         wires[w]);
                stat_t st = {per_wire[c][w], per_wire[c][w], 1};
                row(label, "instr", st, "");
            }
        }
        snprintf(out, sizeof out, "%s/callgrind.%s", keep ? keep : g_tmp, cases[c].kind);
        double hyper_ir =
            hyper && c < 2 ? callgrind_hyper_per_replay(&m, &req, cases[c].reps, out) : 0;
        double raw_ir = callgrind_raw_per_replay(&m, &req, cases[c].reps, 0, out);
        double raw_text_ir = c == 2 ? callgrind_raw_per_replay(&m, &req, cases[c].reps, 1, out) : 0;
        mock_stop(&m);
        double ir = per_wire[c][0];
        stat_t st = {ir, ir, 1};
        row(c == 2 ? stream_label : cases[c].label, "instr", st, c == 1 ? "<= 150k" : "");
        if (hyper_ir > 0) {
            double h = hyper_ir / cases[c].per;
            stat_t hs = {h, h, 1}, q = {ir / h, ir / h, 1};
            row("  floor: hyper client, same requests", "instr", hs, "");
            row("  ratio library/hyper floor, instructions", "x", q, "");
        }
        /* User space only (see child_callgrind_raw): a lower bound, not the client's cost. */
        double r = raw_ir / cases[c].per;
        stat_t rs = {r, r, 1}, rq = {ir / r, ir / r, 1};
        row(c == 2 ? "  floor: raw client finding line ends (user space)"
                   : "  floor: raw client, same requests (user space)",
            "instr", rs, "");
        row("  ratio library/raw floor, instructions (user space)", "x", rq, "");
        if (c == 2) {
            double rt = raw_text_ir / cases[c].per;
            stat_t ts = {rt, rt, 1}, tq = {ir / rt, ir / rt, 1};
            row("  floor: raw client decoding text (user space)", "instr", ts, "");
            row("  ratio library/raw text floor, instructions (user space)", "x", tq, "");
        }
        bodies_free(&req);
    }
    if (n_wires == 3 && !only_wire) {
        /* The wires side by side, and each typed wire over the chat wire. */
        static const char *const what[3] = {"one-request turn", "tool-loop iteration",
                                             "streamed delta"};
        char head[200];
        snprintf(head, sizeof head, "\ninstructions per wire (mock)  %14s %14s %18s\n", wires[0],
                 wires[1], wires[2]);
        printf("%s", head);
        sb_add(&g_table, "%s", head);
        for (int c = 0; c < 3; c++) {
            char line[300];
            snprintf(line, sizeof line, "  %-27s %14.1f %14.1f %18.1f   (%.2fx, %.2fx)\n", what[c],
                     per_wire[c][0], per_wire[c][1], per_wire[c][2],
                     per_wire[c][1] / per_wire[c][0], per_wire[c][2] / per_wire[c][0]);
            printf("%s", line);
            sb_add(&g_table, "%s", line);
        }
    }
    free(loop_script);
    free(stream_script);
}

/* ------------------------------------------------------------------ 8. MCP calls */

/* mcp-fault-server, built next to mock-openai (bench/run.sh builds both). */
static char g_mcp_server[1100];

static int mcp_server_found(void) {
    snprintf(g_mcp_server, sizeof g_mcp_server, "%s", g_mock);
    char *slash = strrchr(g_mcp_server, '/');
    if (!slash) return 0;
    snprintf(slash + 1, sizeof g_mcp_server - (size_t)(slash + 1 - g_mcp_server),
             "mcp-fault-server");
    return access(g_mcp_server, X_OK) == 0;
}

/* The floor: a raw JSON-RPC client of the same server over pipes, one line each way per call
 * (what any MCP stdio client must do at least). */
typedef struct {
    pid_t pid;
    FILE *to, *from;
    char *line;
    size_t cap;
} mcp_raw_t;

static void mcp_raw_send(mcp_raw_t *r, const char *json) {
    if (fputs(json, r->to) < 0 || fputc('\n', r->to) < 0 || fflush(r->to) != 0)
        die("mcp raw: write: %s", strerror(errno));
}

/* Reads lines until the response of request `id` (notifications are skipped). */
static void mcp_raw_answer(mcp_raw_t *r, int id) {
    char want[32];
    snprintf(want, sizeof want, "\"id\":%d,", id);
    for (;;) {
        if (getline(&r->line, &r->cap, r->from) <= 0) die("mcp raw: the server closed");
        if (strstr(r->line, want)) return;
    }
}

static mcp_raw_t mcp_raw_start(void) {
    mcp_raw_t r = {0, NULL, NULL, NULL, 0};
    r.pid = spawn_piped(g_mcp_server, 1, &r.to, &r.from);
    mcp_raw_send(&r, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                     "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                     "\"clientInfo\":{\"name\":\"bench\",\"version\":\"0\"}}}");
    mcp_raw_answer(&r, 0);
    mcp_raw_send(&r, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    return r;
}

static void mcp_raw_stop(mcp_raw_t *r) {
    fclose(r->to);
    fclose(r->from);
    free(r->line);
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
}

/* Per-call wall time from tool_start to tool_complete, stamped in the host's emit. */
typedef struct {
    double *v;
    int n, cap;
    double t_start;
} mcp_host_t;

static void mcp_on_emit(void *ud, const char *json) {
    mcp_host_t *h = ud;
    double t = now_s();
    /* {"type":"tool_start",... / {"type":"tool_complete",... */
    if (strncmp(json, "{\"type\":\"tool_start\"", 20) == 0) {
        h->t_start = t;
    } else if (strncmp(json, "{\"type\":\"tool_complete\"", 23) == 0 && h->n < h->cap) {
        h->v[h->n++] = (t - h->t_start) * 1e6;
    }
}

/* n tool-loop iterations, each calling mcp_f_echo (distinct text, so no loop guard trips). */
static char *config_mcp(int n, const char *llm) {
    sbuf b = {0};
    sb_add(&b, "{\"working_directory\":\"%s\",\"max_iterations\":%d,\"llm\":", g_ws, n + 10);
    if (llm) {
        sb_add(&b, "%s", llm);
    } else {
        sb_add(&b, "{\"provider\":\"scripted\",\"script\":{\"responses\":[");
        for (int k = 1; k <= n; k++)
            sb_add(&b,
                   "{\"tool_calls\":[{\"id\":\"m%d\",\"name\":\"mcp_f_echo\","
                   "\"arguments\":{\"text\":\"ping %d\"}}]},",
                   k, k);
        sb_add(&b, "{\"text\":\"mcp done\"}]}}");
    }
    sb_add(&b, ",\"mcp_servers\":{\"f\":{\"command\":\"%s\",\"trust\":true}}}", g_mcp_server);
    return b.p;
}

#define MCP_CALLS 200

static void bench_mcp(void) {
    if (!mcp_server_found()) {
        printf("mcp: skipped: %s is missing (bench/run.sh builds it)\n", g_mcp_server);
        return;
    }
    int rounds = g_quick ? 2 : 6, n = MCP_CALLS;
    double *raw = calloc((size_t)(rounds * n), sizeof(double));
    mcp_host_t h = {calloc((size_t)(rounds * n), sizeof(double)), 0, rounds * n, 0};
    char *cfg = config_mcp(n, NULL);
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.userdata = &h;
    t.emit = mcp_on_emit;
    agentao_error *err = NULL;
    mcp_raw_t r = mcp_raw_start();
    int nraw = 0;
    char req[256];
    /* Rounds alternate the two sides, so both see the same load; the first round warms up. */
    for (int round = 0; round <= rounds; round++) {
        for (int i = 1; i <= n; i++) {
            int id = round * n + i;
            snprintf(req, sizeof req,
                     "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
                     "{\"name\":\"echo\",\"arguments\":{\"text\":\"ping %d\"}}}",
                     id, i);
            double t0 = now_s();
            mcp_raw_send(&r, req);
            mcp_raw_answer(&r, id);
            if (round > 0) raw[nraw++] = (now_s() - t0) * 1e6;
        }
        /* A scripted agent plays its script once: a fresh one per round (not timed). */
        agentao_agent *a = NULL;
        check(agentao_agent_new(cfg, &t, &a, &err), err, "agentao_agent_new (mcp)");
        int before = h.n;
        char *text = NULL;
        check(agentao_agent_chat(a, "go", -1, NULL, &text, &err), err, "mcp turn");
        if (!text || strcmp(text, "mcp done") != 0) die("mcp turn: unexpected answer: %s", text ? text : "(none)");
        agentao_string_free(text);
        agentao_agent_free(a);
        if (h.n - before != n) die("mcp turn: %d calls completed of %d", h.n - before, n);
        if (round == 0) h.n = 0;
    }
    mcp_raw_stop(&r);
    free(cfg);
    stat_t floor_ = stats(raw, nraw), lib = stats(h.v, h.n);
    row("MCP echo over stdio, raw JSON-RPC client", "us", floor_, "(floor)");
    row("MCP echo, agent tool_start to tool_complete", "us", lib, "");
    stat_t over = {lib.median - floor_.median, lib.p90 - floor_.p90, lib.n};
    row("  MCP call overhead over the stdio floor", "us", over, "<= 25 us pinned");
    free(raw);
    free(h.v);
}

/* child: cgmcp <reps> <base_url> <with_mcp>: instructions of one-request turns (openai, mock)
 * with or without one connected MCP server, run under callgrind as child_callgrind is. */
static int child_callgrind_mcp(int reps, const char *base_url, int with_mcp) {
    if (with_mcp && !mcp_server_found()) die("mcp-fault-server is missing");
    char llm[512];
    snprintf(llm, sizeof llm,
             "{\"provider\":\"openai\",\"base_url\":\"%s\",\"api_key\":\"sk-bench\","
             "\"model\":\"bench-model\",\"max_attempts\":1}",
             base_url);
    char *cfg = with_mcp ? config_mcp(0, llm) : config_openai(base_url);
    agentao_agent *a = agent_new(cfg, NULL);
    for (int i = 0; i < reps + 1; i++) {
        if (i == 1) CALLGRIND_ZERO_STATS;
        reset_history(a);
        char *text = NULL;
        agentao_error *err = NULL;
        check(agentao_agent_chat(a, "hi", -1, NULL, &text, &err), err, "callgrind mcp turn");
        if (!text || strcmp(text, ONE_TEXT) != 0) die("callgrind mcp turn: unexpected answer");
        agentao_string_free(text);
    }
    CALLGRIND_DUMP_STATS;
    agentao_agent_free(a);
    free(cfg);
    printf("ok\n");
    return 0;
}

/* child: cgmcpcall <calls> <reps>: `reps` scripted turns (a fresh agent each, after one warm-up
 * agent) of `calls` MCP echo calls, each `agentao_agent_chat` counted alone (zeroed before it,
 * dumped after it: parsing the script and making the agent are not counted; callgrind's
 * collection switch is per thread, its zero and dump are not); the parent sums the dumps and
 * takes the difference between calls = MCP_CG_CALLS and calls = 0, so connecting cancels. */
static int child_callgrind_mcp_calls(int calls, int reps) {
    if (!mcp_server_found()) die("mcp-fault-server is missing");
    char *cfg = config_mcp(calls, NULL);
    for (int i = 0; i < reps + 1; i++) {
        agentao_agent *a = agent_new(cfg, NULL);
        char *text = NULL;
        agentao_error *err = NULL;
        if (i > 0) CALLGRIND_ZERO_STATS;
        agentao_status st = agentao_agent_chat(a, "go", -1, NULL, &text, &err);
        if (i > 0) CALLGRIND_DUMP_STATS;
        check(st, err, "callgrind mcp calls");
        if (!text || strcmp(text, "mcp done") != 0) die("callgrind mcp calls: unexpected answer");
        agentao_string_free(text);
        agentao_agent_free(a);
    }
    free(cfg);
    printf("ok\n");
    return 0;
}

/* child: cgmcpraw <calls>: the floor's instructions, the raw JSON-RPC client of bench_mcp making
 * `calls` echo calls after a warm-up (user space of this process only, like the raw HTTP
 * client's count: the pipes' system calls are the kernel's). */
static int child_callgrind_mcp_raw(int calls) {
    if (!mcp_server_found()) die("mcp-fault-server is missing");
    mcp_raw_t r = mcp_raw_start();
    char req[256];
    for (int i = 0; i <= calls; i++) {
        if (i == 1) CALLGRIND_ZERO_STATS;
        snprintf(req, sizeof req,
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
                 "{\"name\":\"echo\",\"arguments\":{\"text\":\"ping %d\"}}}",
                 i + 1, i + 1);
        mcp_raw_send(&r, req);
        mcp_raw_answer(&r, i + 1);
    }
    CALLGRIND_DUMP_STATS;
    mcp_raw_stop(&r);
    printf("ok\n");
    return 0;
}

#define MCP_CG_CALLS 50

/* Instructions per MCP echo call (the agent's, counted over its turns) beside the raw JSON-RPC
 * client's on the same server: also a row of --callgrind. */
static void bench_mcp_call_instructions(void) {
#ifndef HAVE_CALLGRIND
    die("MCP instruction counts need valgrind (valgrind/callgrind.h was not found at build time)");
#endif
    if (!mcp_server_found()) {
        printf("MCP instructions: skipped: %s is missing (bench/run.sh builds it)\n", g_mcp_server);
        return;
    }
    int reps = 5;
    const char *keep = getenv("BENCH_CALLGRIND_DIR");
    double ir_calls[2];
    for (int k = 0; k < 2; k++) {
        int calls = k ? MCP_CG_CALLS : 0;
        char out[600], cmd[4096];
        snprintf(out, sizeof out, "%s/callgrind.mcpcall%d", keep ? keep : g_tmp, calls);
        snprintf(cmd, sizeof cmd,
                 "valgrind --tool=callgrind --callgrind-out-file='%s' '%s' "
                 "--child cgmcpcall %d %d >/dev/null 2>'%s.log'",
                 out, g_self, calls, reps, out);
        if (system(cmd) != 0) die("callgrind run failed: see %s.log", out);
        ir_calls[k] = 0;
        for (int d = 1; d <= reps; d++) {
            char path[700];
            snprintf(path, sizeof path, "%s.%d", out, d);
            ir_calls[k] += callgrind_totals(path);
        }
    }
    double per_call = (ir_calls[1] - ir_calls[0]) / (reps * MCP_CG_CALLS);
    int raw_calls = 200;
    char out[600], cmd[4096];
    snprintf(out, sizeof out, "%s/callgrind.mcpraw", keep ? keep : g_tmp);
    snprintf(cmd, sizeof cmd,
             "valgrind --tool=callgrind --callgrind-out-file='%s' '%s' "
             "--child cgmcpraw %d >/dev/null 2>'%s.log'",
             out, g_self, raw_calls, out);
    if (system(cmd) != 0) die("callgrind run failed: see %s.log", out);
    double raw = callgrind_ir(out) / raw_calls;
    stat_t st = {per_call, per_call, 1}, fl = {raw, raw, 1};
    row("instructions per MCP call (echo, stdio)", "instr", st, "<= 100k");
    row("  raw JSON-RPC client, user space (floor)", "instr", fl, "");
    ratio_row("instructions per MCP call", st, fl, "");
}

/* --only mcpcallgrind: instructions per one-request turn without and with one MCP server, and
 * per MCP tool call. */
static void bench_mcp_callgrind(void) {
#ifndef HAVE_CALLGRIND
    die("mcpcallgrind needs valgrind (valgrind/callgrind.h was not found at build time)");
#endif
    if (!mcp_server_found()) die("%s is missing (bench/run.sh builds it)", g_mcp_server);
    char text_script[256];
    snprintf(text_script, sizeof text_script, "{\"responses\":[{\"text\":\"%s\"}]}", ONE_TEXT);
    int reps = 5;
    for (int with_mcp = 0; with_mcp < 2; with_mcp++) {
        mock_t m = mock_start(text_script);
        char out[600], cmd[4096];
        const char *keep = getenv("BENCH_CALLGRIND_DIR");
        snprintf(out, sizeof out, "%s/callgrind.mcp%d", keep ? keep : g_tmp, with_mcp);
        snprintf(cmd, sizeof cmd,
                 "valgrind --tool=callgrind --callgrind-out-file='%s' '%s' --child cgmcp %d %s %d "
                 ">/dev/null 2>'%s.log'",
                 out, g_self, reps, m.base_url, with_mcp, out);
        if (system(cmd) != 0) die("callgrind run failed: see %s.log", out);
        mock_stop(&m);
        double ir = callgrind_ir(out) / reps;
        stat_t st = {ir, ir, 1};
        row(with_mcp ? "instructions per turn, one MCP server, mock" : "instructions per turn, no MCP server, mock",
            "instr", st, "");
    }
    bench_mcp_call_instructions();
}

/* ------------------------------------------------------------------ 9. a long session */

/* The session of tests/compaction.rs (a_long_session_against_a_32k_window_completes_every_turn)
 * through the C ABI: the mock's session model with a 32k window (`mock-openai --session`), a
 * host tool `fetch_blob` answering each turn's request with a 2-20 KB blob, 500 turns (each a
 * tool call and an answer, plus the compactions' summary requests). No host transport, as in
 * the turn rows. */
#define SESSION_WINDOW 32000
#define SESSION_SPAN 5 /* turns per measured window: 3..7 and the last five */

static long session_turns(void) {
    const char *e = getenv("BENCH_SESSION_TURNS");
    return e && atol(e) >= 2 * SESSION_SPAN + 4 ? atol(e) : 500;
}

static size_t session_size(long t) { return 2000 + (size_t)((t * 7919) % 18001); }

static long arg_field(const char *args, const char *key) {
    const char *p = strstr(args, key);
    return p ? atol(p + strlen(key)) : 0;
}

/* `blob T: ` then filler, `size=` bytes, as the test's tool. */
static void blob_execute(void *ud, const char *args, const agentao_tool_call *call,
                         agentao_reply *reply) {
    (void)ud, (void)call;
    long turn = arg_field(args, "turn="), size = arg_field(args, "size=");
    if (size < 0 || size > 1 << 20) size = 0;
    char *text = malloc((size_t)size + 64);
    int n = snprintf(text, 64, "blob %ld: ", turn);
    static const char filler[] = "lorem ipsum dolor sit amet ";
    for (long i = n; i < size; i++) text[i] = filler[(i - n) % (sizeof filler - 1)];
    text[size > n ? size : n] = 0;
    agentao_reply_tool_result(reply, text, NULL);
    free(text);
}

static agentao_agent *session_agent(const char *base_url) {
    sbuf b = {0};
    sb_add(&b,
           "{\"working_directory\":\"%s\",\"max_context_tokens\":%d,\"llm\":{\"provider\":\"openai\","
           "\"base_url\":\"%s\",\"api_key\":\"sk-bench\",\"model\":\"bench-model\","
           "\"retry_backoff_base_ms\":1,\"retry_backoff_cap_ms\":5}}",
           g_ws, SESSION_WINDOW, base_url);
    agentao_agent *a = agent_new(b.p, NULL);
    free(b.p);
    agentao_tool_desc d = {
        .struct_size = sizeof d,
        .name = "fetch_blob",
        .description = "returns a blob",
        .parameters_json = "{\"type\":\"object\",\"properties\":{\"request\":{\"type\":\"string\"}}}",
        .is_read_only = true,
        .execute = blob_execute,
    };
    agentao_error *err = NULL;
    check(agentao_agent_add_tool(a, &d, false, &err), err, "add fetch_blob");
    return a;
}

static void session_turn(agentao_agent *a, long t) {
    char msg[64], *text = NULL;
    snprintf(msg, sizeof msg, "turn=%ld size=%zu", t, session_size(t));
    agentao_error *err = NULL;
    check(agentao_agent_chat(a, msg, -1, NULL, &text, &err), err, "session turn");
    if (!text || strncmp(text, "Noted: blob", 11) != 0)
        die("session turn %ld: unexpected answer %s", t, text ? text : "(null)");
    agentao_string_free(text);
}

/* Full compactions so far (agentao_agent_context_usage). */
static long session_compactions(agentao_agent *a) {
    char *json = NULL;
    agentao_error *err = NULL;
    check(agentao_agent_context_usage(a, &json, &err), err, "context_usage");
    const char *p = strstr(json, "\"compactions\":");
    long n = p ? atol(p + 14) : -1;
    agentao_string_free(json);
    return n;
}

/* child: session <port>. The whole session in a fresh process: CPU time (process, all the
 * library's threads) and requests in turns 3..7 and in the last five; RSS after every turn,
 * its peak before the first compaction (full or micro), from it to the middle turn, and over
 * the second half. */
static int child_session(int port) {
    mock_t m = {0};
    m.port = port;
    snprintf(m.base_url, sizeof m.base_url, "http://127.0.0.1:%d/v1", port);
    long turns = session_turns(), last = turns - SESSION_SPAN + 1;
    agentao_agent *a = session_agent(m.base_url);
    double cpu[2] = {0}, req[2] = {0}, wall[2] = {0};
    long peak_before = 0, peak_first = 0, peak_second = 0, first_compaction = 0;
    for (long t = 1; t <= turns; t++) {
        int w = t >= 3 && t < 3 + SESSION_SPAN ? 0 : t >= last ? 1 : -1;
        double r0 = w >= 0 ? mock_stat(&m, "requests") : 0;
        double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), t0 = now_s();
        session_turn(a, t);
        double c1 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), t1 = now_s();
        if (w >= 0) {
            cpu[w] += c1 - c0;
            wall[w] += t1 - t0;
            req[w] += mock_stat(&m, "requests") - r0;
        }
        long rss = rss_kib();
        if (!first_compaction && session_compactions(a) > 0) first_compaction = t;
        long *peak = !first_compaction ? &peak_before : t <= turns / 2 ? &peak_first : &peak_second;
        if (rss > *peak) *peak = rss;
    }
    printf("ok requests=%.0f compactions=%ld first_compaction=%ld req_a=%.0f req_b=%.0f "
           "cpu_a=%.3f cpu_b=%.3f wall_a=%.3f wall_b=%.3f rss_before=%ld rss_first=%ld "
           "rss_second=%ld hwm=%ld\n",
           mock_stat(&m, "requests"), session_compactions(a), first_compaction, req[0], req[1],
           cpu[0] * 1e6 / req[0], cpu[1] * 1e6 / req[1], wall[0] * 1e6 / req[0],
           wall[1] * 1e6 / req[1], peak_before, peak_first, peak_second, hwm_kib());
    agentao_agent_free(a);
    return 0;
}

/* child: cgsession <port>, under `callgrind --instr-atstart=no`: only turns 3..7 (dump 1) and
 * the last five (dump 2) are instrumented, the rest runs uncounted (and faster). Prints the
 * requests of each window. */
static int child_callgrind_session(int port) {
    mock_t m = {0};
    m.port = port;
    snprintf(m.base_url, sizeof m.base_url, "http://127.0.0.1:%d/v1", port);
    long turns = session_turns(), last = turns - SESSION_SPAN + 1;
    agentao_agent *a = session_agent(m.base_url);
    double r[4] = {0};
    for (long t = 1; t <= turns; t++) {
        int k = t == 3 ? 0 : t == last ? 2 : -1;
        if (k >= 0) {
            r[k] = mock_stat(&m, "requests");
            CALLGRIND_START_INSTRUMENTATION;
            CALLGRIND_ZERO_STATS;
        }
        session_turn(a, t);
        if (t == 2 + SESSION_SPAN || t == turns) {
            CALLGRIND_DUMP_STATS;
            CALLGRIND_STOP_INSTRUMENTATION;
            r[t == turns ? 3 : 1] = mock_stat(&m, "requests");
        }
    }
    printf("ok req_a=%.0f req_b=%.0f\n", r[1] - r[0], r[3] - r[2]);
    agentao_agent_free(a);
    return 0;
}

/* The calls of the function whose name ends `suffix` in a callgrind dump, and their inclusive
 * instructions: the `calls=` lines under each `cfn=` of it, and the cost line after each. */
static void callgrind_calls(const char *path, const char *suffix, double *calls, double *ir) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "awk -v suf='%s' '"
             "/^c?fn=\\(/ { s = $0; sub(/^c?fn=\\(/, \"\", s); id = s; sub(/\\).*/, \"\", id);"
             " sub(/^[0-9]+\\) ?/, \"\", s); if (s != \"\") name[id] = s;"
             " if ($0 ~ /^cfn=/) cur = id; next }"
             "/^calls=/ { n = $0; sub(/^calls=/, \"\", n); split(n, f, \" \");"
             " hit = length(name[cur]) >= length(suf) &&"
             " substr(name[cur], length(name[cur]) - length(suf) + 1) == suf;"
             " if (hit) c += f[1]; grab = hit; next }"
             "grab { i += $2; grab = 0 }"
             "END { printf \"%%.0f %%.0f\\n\", c, i }' '%s'",
             suffix, path);
    FILE *p = popen(cmd, "r");
    if (!p || fscanf(p, "%lf %lf", calls, ir) != 2) die("callgrind: cannot read calls in %s", path);
    pclose(p);
}

static void bench_session(void) {
    long turns = session_turns();
    char port[16], turns_s[16];
    snprintf(turns_s, sizeof turns_s, "%ld", turns);
    printf("long session: %ld turns against a %d-token window (mock session model)\n", turns,
           SESSION_WINDOW);

    mock_t m = mock_start_any(NULL, NULL, SESSION_WINDOW);
    snprintf(port, sizeof port, "%d", m.port);
    char *argv[] = {g_self, "--child", "session", port, NULL};
    char *line = run_child(argv);
    mock_stop(&m);
    double a = kv(line, "cpu_a"), b = kv(line, "cpu_b");
    char label[120];
    stat_t s;
#define SESSION_ROW(name, unit, v, target)                                                          \
    do {                                                                                           \
        s = (stat_t){(v), (v), 1};                                                                 \
        row(name, unit, s, target);                                                                \
    } while (0)
    /* Two requests a turn (the call, the answer); the rest are the summaries of full
     * compactions. `compactions` of agentao_agent_context_usage counts both kinds. */
    SESSION_ROW("session: requests", "n", kv(line, "requests"), "");
    SESSION_ROW("session: summary requests (full compactions)", "n",
                kv(line, "requests") - 2.0 * (double)turns, "");
    SESSION_ROW("session: compactions, full and micro", "n", kv(line, "compactions"), "");
    SESSION_ROW("session: first compaction at turn", "n", kv(line, "first_compaction"), "");
    snprintf(label, sizeof label, "session: CPU/request, turns 3-%d", 2 + SESSION_SPAN);
    SESSION_ROW(label, "us", a, "");
    snprintf(label, sizeof label, "session: CPU/request, turns %ld-%ld", turns - SESSION_SPAN + 1,
             turns);
    SESSION_ROW(label, "us", b, "");
    SESSION_ROW("session: ratio CPU/request, last/early", "x", b / a, "<= 1.5x");
    SESSION_ROW("session: wall/request, turns 3-7 (incl. mock)", "us", kv(line, "wall_a"), "");
    SESSION_ROW("session: wall/request, last five (incl. mock)", "us", kv(line, "wall_b"), "");
    SESSION_ROW("session: peak RSS before the first compaction", "KiB", kv(line, "rss_before"), "");
    SESSION_ROW("session: peak RSS, first compaction to middle", "KiB", kv(line, "rss_first"), "");
    SESSION_ROW("session: peak RSS, second half", "KiB", kv(line, "rss_second"), "flat");
    SESSION_ROW("session: VmHWM at the end", "KiB", kv(line, "hwm"), "");
    free(line);

#ifdef HAVE_CALLGRIND
    if (system("valgrind --version >/dev/null 2>&1") != 0) {
        printf("session: valgrind not found: its instruction counts are skipped\n");
        return;
    }
    m = mock_start_any(NULL, NULL, SESSION_WINDOW);
    char out[600], cmd[4096], res[700];
    const char *keep = getenv("BENCH_CALLGRIND_DIR");
    snprintf(out, sizeof out, "%s/callgrind.session", keep ? keep : g_tmp);
    snprintf(res, sizeof res, "%s.answer", out);
    snprintf(cmd, sizeof cmd,
             "valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file='%s' '%s' "
             "--child cgsession %d "
             ">'%s' 2>'%s.log'",
             out, g_self, m.port, res, out);
    if (system(cmd) != 0) die("callgrind session run failed: see %s.log", out);
    mock_stop(&m);
    FILE *f = fopen(res, "r");
    char ans[256] = " ";
    if (!f || !fgets(ans + 1, sizeof ans - 1, f)) die("callgrind session: no answer");
    fclose(f);
    double ra = kv(ans, "req_a"), rb = kv(ans, "req_b");
    char d1[700], d2[700];
    snprintf(d1, sizeof d1, "%s.1", out);
    snprintf(d2, sizeof d2, "%s.2", out);
    double ia = callgrind_totals(d1) / ra, ib = callgrind_totals(d2) / rb;
    SESSION_ROW("session: instructions/request, turns 3-7", "instr", ia, "");
    SESSION_ROW("session: instructions/request, last five", "instr", ib, "");
    SESSION_ROW("session: ratio instructions/request, last/early", "x", ib / ia, "<= 1.5x");
    double calls = 0, ir = 0;
    const char *dumps[2] = {d1, d2};
    for (int k = 0; k < 2; k++) {
        double c, i;
        callgrind_calls(dumps[k], "::microcompact", &c, &i);
        calls += c;
        ir += i;
    }
    SESSION_ROW("session: microcompaction passes (both windows)", "n", calls, "");
    if (calls > 0) SESSION_ROW("session: instructions per microcompaction pass", "instr", ir / calls, "");
#undef SESSION_ROW
#endif
}

/* ------------------------------------------------------------------ a growing history */

/* A session that only grows (one-request turns, no compaction in the default 200k window):
 * instructions per request when the request holds ~20 messages and when it holds ~2,000
 * (BENCH_GROWTH_MESSAGES), on each wire. What is left to grow is what walks the history per
 * request (the wire cache keeps the rendering itself flat on the chat wire). */
#define GROWTH_SPAN 5 /* requests per measured window */

static long growth_messages(void) {
    const char *e = getenv("BENCH_GROWTH_MESSAGES");
    return e && atol(e) >= 40 ? atol(e) : 2000;
}

/* The turn whose request holds about `messages` messages (2t - 1: the history's two a turn
 * and the new one), centred in its window. */
static long growth_first_turn(long messages) { return (messages + 1) / 2 - GROWTH_SPAN / 2; }

/* child: cggrowth <wire> <base_url>, under `callgrind --instr-atstart=no`: only the window
 * around message 20 (dump 1) and the one around message N (dump 2) are counted. */
static int child_callgrind_growth(const char *wire, const char *base_url) {
    char *cfg = config_wire(wire, base_url);
    agentao_agent *a = agent_new(cfg, NULL);
    long first[2] = {growth_first_turn(20), growth_first_turn(growth_messages())};
    long last = first[1] + GROWTH_SPAN - 1;
    for (long t = 1; t <= last; t++) {
        if (t == first[0] || t == first[1]) {
            CALLGRIND_START_INSTRUMENTATION;
            CALLGRIND_ZERO_STATS;
        }
        agentao_error *err = NULL;
        char *text = NULL;
        check(agentao_agent_chat(a, "hi", -1, NULL, &text, &err), err, "growth turn");
        if (!text || strcmp(text, ONE_TEXT) != 0) die("growth turn: unexpected answer");
        agentao_string_free(text);
        if (t == first[0] + GROWTH_SPAN - 1 || t == last) {
            CALLGRIND_DUMP_STATS;
            CALLGRIND_STOP_INSTRUMENTATION;
        }
    }
    char *usage = NULL;
    agentao_error *err = NULL;
    check(agentao_agent_context_usage(a, &usage, &err), err, "growth usage");
    /* A compaction would make the late window short: the figure would not be of N messages. */
    if (!strstr(usage, "\"compactions\":0")) die("growth: the history was compacted: %s", usage);
    agentao_string_free(usage);
    agentao_agent_free(a);
    free(cfg);
    printf("ok\n");
    return 0;
}

static void bench_growth(void) {
#ifndef HAVE_CALLGRIND
    die("growth needs valgrind (valgrind/callgrind.h was not found at build time)");
#else
    static const char *const wires[3] = {"openai", "anthropic", "openai-responses"};
    long n = growth_messages();
    char script[256];
    /* The mock answers every request without a tool result with the first response. */
    snprintf(script, sizeof script, "{\"responses\":[{\"text\":\"%s\"}]}", ONE_TEXT);
    mock_t m = mock_start(script);
    const char *keep = getenv("BENCH_CALLGRIND_DIR");
    printf("growing history: one-request turns up to message %ld, instructions per request\n", n);
    for (int w = 0; w < 3; w++) {
        char out[600], cmd[4096], d1[700], d2[700], label[160];
        snprintf(out, sizeof out, "%s/callgrind.growth.%s", keep ? keep : g_tmp, wires[w]);
        snprintf(cmd, sizeof cmd,
                 "valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file='%s' '%s' "
                 "--child cggrowth %s %s >/dev/null 2>'%s.log'",
                 out, g_self, wires[w], m.base_url, out);
        if (system(cmd) != 0) die("callgrind growth run failed: see %s.log", out);
        snprintf(d1, sizeof d1, "%s.1", out);
        snprintf(d2, sizeof d2, "%s.2", out);
        double early = callgrind_totals(d1) / GROWTH_SPAN, late = callgrind_totals(d2) / GROWTH_SPAN;
        stat_t se = {early, early, 1}, sl = {late, late, 1}, q = {late / early, late / early, 1};
        snprintf(label, sizeof label, "growth, %s: instr/request at message 20", wires[w]);
        row(label, "instr", se, "");
        snprintf(label, sizeof label, "growth, %s: instr/request at message %ld", wires[w], n);
        row(label, "instr", sl, "");
        snprintf(label, sizeof label, "growth, %s: ratio message %ld / message 20", wires[w], n);
        row(label, "x", q, "<= 1.3x");
    }
    mock_stop(&m);
#endif
}

/* ------------------------------------------------------------------ 10. agentao-acp */

/* agentao-acp, built next to mock-openai (bench/run.sh builds it). */
static char g_acp[1100];

static int acp_found(void) {
    snprintf(g_acp, sizeof g_acp, "%s", g_mock);
    char *slash = strrchr(g_acp, '/');
    if (!slash) return 0;
    snprintf(slash + 1, sizeof g_acp - (size_t)(slash + 1 - g_acp), "agentao-acp");
    return access(g_acp, X_OK) == 0;
}

typedef struct {
    pid_t pid;
    FILE *to, *from;
    char *line;
    size_t cap;
} acp_t;

static void acp_send(acp_t *c, const char *json) {
    if (fputs(json, c->to) < 0 || fputc('\n', c->to) < 0 || fflush(c->to) != 0)
        die("acp: write: %s", strerror(errno));
}

/* Whether `line` is the server's response to request `id` (its messages start with
 * {"jsonrpc":"2.0", then a request or notification's "method" or a response's "id"). */
static int acp_is_answer(const char *line, int id) {
    char want[64];
    int n = snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"id\":%d,", id);
    return strncmp(line, want, (size_t)n) == 0;
}

/* Reads lines until the response to request `id`; returns that line (c->line). */
static const char *acp_answer(acp_t *c, int id) {
    for (;;) {
        if (getline(&c->line, &c->cap, c->from) <= 0) die("acp: the server closed");
        if (acp_is_answer(c->line, id)) return c->line;
    }
}

static acp_t acp_start(const char *base_url) {
    acp_t c = {0, NULL, NULL, NULL, 0};
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) die("pipe");
    setenv("AGENTAO_BENCH_ACP_KEY", "sk-bench", 1);
    c.pid = fork();
    if (c.pid < 0) die("fork");
    if (c.pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        execl(g_acp, g_acp, "--provider", "openai", "--base-url", base_url, "--model",
              "bench-model", "--api-key-env", "AGENTAO_BENCH_ACP_KEY", "--no-persist", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c.to = fdopen(in[1], "w");
    c.from = fdopen(out[0], "r");
    if (!c.to || !c.from) die("fdopen");
    acp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":1,\"clientCapabilities\":{}}}");
    acp_answer(&c, 0);
    return c;
}

static void acp_stop(acp_t *c) {
    fclose(c->to);
    fclose(c->from);
    free(c->line);
    kill(c->pid, SIGKILL);
    waitpid(c->pid, NULL, 0);
}

/* CPU time of every thread of process `pid` so far, in seconds (the scheduler's nanoseconds,
 * /proc/PID/task/TID/schedstat: the clock-tick counts of /proc/PID/stat are too coarse). */
static double proc_cpu_s(pid_t pid) {
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d) die("%s: %s", dir, strerror(errno));
    double ns = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[384];
        snprintf(path, sizeof path, "%s/%s/schedstat", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* the thread ended */
        double v = 0;
        if (fscanf(f, "%lf", &v) == 1) ns += v;
        fclose(f);
    }
    closedir(d);
    return ns * 1e-9;
}

/* --only acp: agentao-acp against the library's own C callback on the same mock, STREAM_CHUNKS
 * 4-char deltas a prompt, rounds alternating: CPU per streamed chunk (the server process's
 * threads against this process's while it streams with a no-op on_delta and no transport) and
 * the time from the request to the first delta (on_delta) or the first agent_message_chunk
 * line (read on this side of the server's stdout). */
static void bench_acp(void) {
    if (!acp_found()) {
        printf("acp: skipped: %s is missing (bench/run.sh builds it)\n", g_acp);
        return;
    }
    int warm = 1, runs = g_quick ? 3 : 7;
    char *script = script_text_stream(STREAM_CHUNKS, 4, 1);
    mock_t m = mock_start(script);
    char *cfg = config_openai(m.base_url);
    agentao_agent *a = agent_new(cfg, NULL);
    host_t h;
    host_init(&h);
    acp_t c = acp_start(m.base_url);
    char req[1400], session[128];
    double *lib_cpu = calloc((size_t)runs, sizeof(double)), *acp_cpu = calloc((size_t)runs, sizeof(double));
    double *lib_first = calloc((size_t)runs, sizeof(double)), *acp_first = calloc((size_t)runs, sizeof(double));
    double *over_first = calloc((size_t)runs, sizeof(double));
    long updates = 0;
    for (int i = 0; i < warm + runs; i++) {
        reset_history(a);
        host_reset(&h);
        agentao_error *err = NULL;
        double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), t0 = now_s();
        check(agentao_agent_stream(a, "go", -1, NULL, on_delta, on_done, &h, &err), err, "stream");
        host_wait(&h);
        double c1 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        if (h.status != AGENTAO_STATUS_OK || atomic_load(&h.deltas) != STREAM_CHUNKS)
            die("acp bench: the library's stream gave %ld deltas", atomic_load(&h.deltas));

        /* A new session each round (not timed), as the library's history is reset. */
        int id = 10 + 2 * i;
        snprintf(req, sizeof req,
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"session/new\",\"params\":"
                 "{\"cwd\":\"%s\",\"mcpServers\":[]}}",
                 id - 1, g_ws);
        acp_send(&c, req);
        const char *ans = acp_answer(&c, id - 1);
        const char *sid = strstr(ans, "\"sessionId\":\"");
        if (!sid) die("acp: session/new answered %s", ans);
        snprintf(session, sizeof session, "%.*s", (int)strcspn(sid + 13, "\""), sid + 13);
        snprintf(req, sizeof req,
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"session/prompt\",\"params\":"
                 "{\"sessionId\":\"%s\",\"prompt\":[{\"type\":\"text\",\"text\":\"go\"}]}}",
                 id, session);
        double a0 = proc_cpu_s(c.pid), s0 = now_s(), first = 0;
        acp_send(&c, req);
        long n = 0;
        for (;;) {
            if (getline(&c.line, &c.cap, c.from) <= 0) die("acp: the server closed");
            if (strstr(c.line, "\"agent_message_chunk\"")) {
                if (n++ == 0) first = now_s();
            } else if (acp_is_answer(c.line, id)) {
                if (!strstr(c.line, "end_turn")) die("acp: the prompt ended %s", c.line);
                break;
            }
        }
        double a1 = proc_cpu_s(c.pid);
        if (n == 0) die("acp: no agent_message_chunk");
        if (i >= warm) {
            int k = i - warm;
            lib_cpu[k] = (c1 - c0) * 1e6 / STREAM_CHUNKS;
            acp_cpu[k] = (a1 - a0) * 1e6 / STREAM_CHUNKS;
            lib_first[k] = (h.t_first_delta - t0) * 1e3;
            acp_first[k] = (first - s0) * 1e3;
            over_first[k] = acp_first[k] - lib_first[k];
            updates = n;
        }
    }
    acp_stop(&c);
    agentao_agent_free(a);
    mock_stop(&m);
    free(cfg);
    free(script);
    double *over_cpu = calloc((size_t)runs, sizeof(double));
    for (int k = 0; k < runs; k++) over_cpu[k] = acp_cpu[k] - lib_cpu[k];
    stat_t lc = stats(lib_cpu, runs), ac = stats(acp_cpu, runs), oc = stats(over_cpu, runs);
    row("ACP: library CPU per delta, C on_delta (floor)", "us", lc, "");
    row("ACP: agentao-acp CPU per streamed chunk", "us", ac, "");
    row("  ACP own overhead per chunk (same round)", "us", oc, "< 5 us");
    stat_t lf = stats(lib_first, runs), af = stats(acp_first, runs), of = stats(over_first, runs);
    row("ACP: library request to first on_delta (floor)", "ms", lf, "");
    row("ACP: session/prompt to first session/update", "ms", af, "");
    row("  ACP first update after the library's (same round)", "ms", of, "< 1 ms");
    stat_t u = {(double)updates, (double)updates, 1};
    row("  ACP agent_message_chunk updates per prompt", "count", u, "");
    free(lib_cpu), free(acp_cpu), free(lib_first), free(acp_first), free(over_first), free(over_cpu);
}

/* ------------------------------------------------------------------ main */

static void machine(sbuf *b) {
    char model[256] = "unknown", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "model name", 10) == 0) {
                char *p = strchr(line, ':');
                if (p) {
                    snprintf(model, sizeof model, "%s", p + 2);
                    model[strcspn(model, "\n")] = 0;
                }
                break;
            }
        fclose(f);
    }
    long mem = sysconf(_SC_PHYS_PAGES) / 1024 * (sysconf(_SC_PAGESIZE) / 1024);
    sb_add(b, "\"nproc\": %ld, \"cpu\": \"%s\", \"memory_mib\": %ld", sysconf(_SC_NPROCESSORS_ONLN),
           model, mem);
    printf("machine: %ld cpus, %s, %ld MiB; libagentao %s\n", sysconf(_SC_NPROCESSORS_ONLN), model,
           mem, agentao_version());
}

/* --only bindings: the C++, Go and Swift layers against the C API (its own file). */
#include "bench_bindings.c"

int main(int argc, char **argv) {
    const char *out = "bench/results.json";
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0) die("readlink /proc/self/exe");
    g_self[n] = 0;
    signal(SIGPIPE, SIG_IGN);
    /* The runtime's worker count, a host's choice (agentao_runtime_set_worker_threads), for
       comparing placements; children inherit it. Default: the library's (one per core). */
    const char *workers = getenv("BENCH_WORKER_THREADS");
    if (workers && *workers) {
        agentao_error *err = NULL;
        if (agentao_runtime_set_worker_threads((uint32_t)atoi(workers), &err) != AGENTAO_STATUS_OK)
            die("BENCH_WORKER_THREADS");
        if (!(argc >= 2 && strcmp(argv[1], "--child") == 0))
            printf("runtime worker threads: %s\n", workers);
    }

    if (argc >= 3 && strcmp(argv[1], "--child") == 0) {
        const char *ws = getenv("AGENTAO_BENCH_WS");
        if (!ws) die("child without AGENTAO_BENCH_WS");
        snprintf(g_ws, sizeof g_ws, "%s", ws);
        if (strcmp(argv[2], "mem") == 0 && argc == 5) return child_mem(argv[3], argv[4]);
        if (strcmp(argv[2], "cg") == 0 && argc == 7)
            return child_callgrind(argv[3], atoi(argv[4]), argv[5], argv[6]);
        if (strcmp(argv[2], "session") == 0 && argc == 4) return child_session(atoi(argv[3]));
        if (strcmp(argv[2], "cggrowth") == 0 && argc == 5)
            return child_callgrind_growth(argv[3], argv[4]);
        if (strcmp(argv[2], "cgsession") == 0 && argc == 4)
            return child_callgrind_session(atoi(argv[3]));
        if (strcmp(argv[2], "cgraw") == 0 && argc == 7)
            return child_callgrind_raw(argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
        if (strcmp(argv[2], "cgmcp") == 0 && argc == 6) {
            if (!realpath(getenv("AGENTAO_BENCH_MOCK"), g_mock)) die("AGENTAO_BENCH_MOCK");
            return child_callgrind_mcp(atoi(argv[3]), argv[4], atoi(argv[5]));
        }
        if (strcmp(argv[2], "cgmcpcall") == 0 && argc == 5) {
            if (!realpath(getenv("AGENTAO_BENCH_MOCK"), g_mock)) die("AGENTAO_BENCH_MOCK");
            return child_callgrind_mcp_calls(atoi(argv[3]), atoi(argv[4]));
        }
        if (strcmp(argv[2], "cgmcpraw") == 0 && argc == 4) {
            if (!realpath(getenv("AGENTAO_BENCH_MOCK"), g_mock)) die("AGENTAO_BENCH_MOCK");
            return child_callgrind_mcp_raw(atoi(argv[3]));
        }
        if (strcmp(argv[2], "bindworker") == 0 && argc == 3) return child_bindworker();
        if (strcmp(argv[2], "scale") == 0 && argc == 7)
            return child_scale(argv[3], atoi(argv[4]), atoi(argv[5]), argv[6]);
        die("bad child arguments");
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mock") == 0 && i + 1 < argc) {
            if (!realpath(argv[++i], g_mock)) die("--mock %s: %s", argv[i], strerror(errno));
        } else if (strcmp(argv[i], "--hyper-floor") == 0 && i + 1 < argc) {
            snprintf(g_hyper, sizeof g_hyper, "%s", argv[++i]);
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            g_only = argv[++i];
        } else if (strcmp(argv[i], "--cpu") == 0 && i + 1 < argc) {
            g_cpu = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--quick") == 0) {
            g_quick = 1;
        } else if (strcmp(argv[i], "--callgrind") == 0) {
            g_only = "callgrind";
        } else {
            die("usage: bench --mock PATH [--hyper-floor PATH] [--out FILE] [--quick] [--only SECTION] "
                "[--callgrind] [--cpu N]");
        }
    }
    if (!g_mock[0]) die("usage: bench --mock PATH [--out FILE] [--quick]");
    if (g_cpu >= 0) {
        /* Before any thread or child exists: the library's threads, the mock and the floors
         * inherit the mask, so every wake-up between them is a switch on one CPU. */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(g_cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) die("--cpu %d: %s", g_cpu, strerror(errno));
    }
    raise_nofile();
    make_workspace();
    setenv("AGENTAO_BENCH_WS", g_ws, 1);
    setenv("AGENTAO_BENCH_MOCK", g_mock, 1);

    sbuf mach = {0};
    machine(&mach);
    char pinned[16] = "null";
    if (g_cpu >= 0) snprintf(pinned, sizeof pinned, "%d", g_cpu);
    printf("placement: %s%s\n", g_cpu >= 0 ? "everything pinned to CPU " : "not pinned",
           g_cpu >= 0 ? pinned : "");
    printf("%-44s %14s %14s  %-10s %s\n", "figure", "median", "p90", "unit", "target");
    sb_add(&g_table, "%-44s %14s %14s  %-10s %s\n", "figure", "median", "p90", "unit", "target");
    double t0 = now_s();
    sb_add(&g_json, "{\n  \"library_version\": \"%s\",\n  \"machine\": {%s},\n  \"quick\": %s,\n  \"pinned_cpu\": %s,\n  \"figures\": {",
           agentao_version(), mach.p, g_quick ? "true" : "false", pinned);

    if (want("turn") || want("stream") || want("loop")) hyper_start();
    if (want("turn")) bench_turn();
    if (want("stream")) bench_stream();
    if (want("loop")) bench_tool_loop();
    if (want("events")) bench_host_events();
    if (want("hosttool")) bench_host_tool();
    if (want("memory")) {
        /* memory: the openai config points at a live mock (never contacted while idle) */
        mock_t m = mock_start("{\"responses\":[{\"text\":\"x\"}]}");
        bench_memory(&m);
        mock_stop(&m);
    }
    if (want("scale")) bench_scale();
    if (want("mcp")) bench_mcp();
    if (want("hooks")) bench_hooks();
    if (want("acp")) bench_acp();
    /* Needs the workers bench/run.sh builds for it: only when asked. */
    if (g_only && strcmp(g_only, "bindings") == 0) bench_bindings();
    /* Minutes long (500 turns, one of them under valgrind): only when asked. */
    if (g_only && strcmp(g_only, "session") == 0) bench_session();
    /* A thousand turns per wire, two windows of them under valgrind: only when asked. */
    if (g_only && strcmp(g_only, "growth") == 0) bench_growth();
    if (g_only && strcmp(g_only, "mcpcallgrind") == 0) bench_mcp_callgrind();
    /* valgrind runs only when asked: it takes a while and is not always installed */
    if (g_only && strcmp(g_only, "callgrind") == 0) bench_callgrind();
    if (g_only && strcmp(g_only, "callgrind") == 0) bench_mcp_call_instructions();

    double total = now_s() - t0;
    sb_add(&g_json, "\n  },\n  \"total_seconds\": %.1f\n}\n", total);
    write_file(out, g_json.p);
    printf("total %.1f s; results in %s\n", total, out);
    rm_rf(g_tmp);
    return 0;
}
