/*
 * bench_bindings.c: `--only bindings`, what the C++, Go and Swift layers add over the C API.
 * Part of bench.c's translation unit (included at its end: it shares the statistics, the rows
 * and the JSON writer).
 *
 * Every language runs the same workloads in a worker process of its own, driven over a pipe
 * with one line per command, so that one run measures them all in alternating rounds (the
 * machine's load moves between rounds, not between languages):
 *
 *   setup <scenario> <config-json>   the scenario's agent          -> "ok"
 *   run <scenario> <turns>           that many turns               -> "<cpu_ns> <wall_ns> <units>"
 *   cg <scenario> <turns>            under callgrind: one warm-up turn, the counters zeroed,
 *                                    `turns` turns, the counts dumped -> "ok"
 *
 * cpu_ns is the process's CPU time (CLOCK_PROCESS_CPUTIME_ID: every thread, the library's
 * runtime and the language's own included) over the turns only; the history reset between
 * turns is outside it. units is what the worker's callbacks counted (deltas, events, turns),
 * checked against the expected count. The scenarios, all on the scripted provider (no socket,
 * no mock: its time would be noise on top of a sub-microsecond difference; the scripted
 * provider's deltas go through the same turn loop, events and streams as a wire's):
 *
 *   delta   a streamed turn of BW_DELTAS one-character deltas, null transport, the language's
 *           streaming API (C: agentao_agent_stream's on_delta)
 *   emit    the same turn by chat with a transport whose emit is a no-op (one llm_text event
 *           per delta reaches the language)
 *   event   a turn of BW_CALLS read_file calls, 3 host events each, to a no-op host-event
 *           observer: the typed one where the binding has one (Go, Swift: each event decoded as
 *           the binding decodes it); C's and C++'s observers take the JSON
 *   turn    a one-response chat turn, null transport (200 a round, BENCH_BIND_TURNS)
 *   event-json  the event turn, to a no-op observer of the events' JSON in every language (C's
 *           and C++'s as in `event`): like with like, no decode
 *
 * The workers: this program (`--child bindworker`, the C floor), target/bench/bind-cpp
 * (bench/bindings/worker.cpp on bindings/cpp/agentao.hpp), target/bench/bind-go
 * (bench/bindings/go, the public Go API; with --cgo-floor, "Go cgo floor": the C worker's
 * calls made from Go through cgo, each callback crossing into a Go function that only counts,
 * what any Go host pays with no binding: "Go - Go cgo floor" is the binding's own cost),
 * target/bench/bind-swift (bench/bindings/swift-worker,
 * the public Swift API, run in the Debian 13 root: its build.sh), each skipped with a line saying
 * why when bench/run.sh could not build it. All are pinned to one CPU (--cpu N, else the last
 * one): they run one at a time, so the pin costs them nothing and keeps the wake-ups of a turn on
 * one core.
 */

#define BW_DELTAS 2000
#define BW_CALLS 50
#define BW_MAX_WORKERS 7

static const char *const bw_scenarios[] = {"delta", "emit", "event", "turn", "event-json"};
#define BW_SCENARIOS 5

/* Turns per round and the divisor of each scenario's per-unit figure. BENCH_BIND_TURNS=N sets
 * the turn scenario's turns per round (default 200, a burst of ~1-2 ms): a worker idle between
 * rounds pays its runtime's wake-up in each burst (Go's sysmon polls every 20 us for the first
 * ~1 ms after a blocking read), which a long round (say 5000) spreads out: the steady state. */
static int bw_turns(int s) {
    static int turn_round = 0;
    if (!turn_round) {
        const char *v = getenv("BENCH_BIND_TURNS");
        turn_round = v && atoi(v) > 0 ? atoi(v) : 200;
    }
    return s == 3 ? turn_round : 2;
}
static double bw_units_per_turn(int s) { return s == 2 || s == 4 ? 3.0 * BW_CALLS : s == 3 ? 1.0 : BW_DELTAS; }

/* ------------------------------------------------------------------ the C worker */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    agentao_status status;
    atomic_long n; /* deltas, events or emits seen */
} bw_count_t;

static void bw_on_delta(void *ud, const char *delta_json) {
    (void)delta_json;
    atomic_fetch_add_explicit(&((bw_count_t *)ud)->n, 1, memory_order_relaxed);
}

static void bw_on_done(void *ud, agentao_status st, const char *outcome, const agentao_error *err) {
    (void)outcome;
    (void)err;
    bw_count_t *c = ud;
    pthread_mutex_lock(&c->mu);
    c->status = st;
    c->done = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* A no-op emit that counts the llm_text events (the deltas), as the other workers do. */
static void bw_on_emit(void *ud, const char *event_json) {
    if (strncmp(event_json, "{\"type\":\"llm_text\"", 18) == 0)
        atomic_fetch_add_explicit(&((bw_count_t *)ud)->n, 1, memory_order_relaxed);
}

typedef struct {
    agentao_agent *agent[BW_SCENARIOS];
    bw_count_t count[BW_SCENARIOS];
} bw_worker_t;

static int bw_scenario(const char *name) {
    for (int s = 0; s < BW_SCENARIOS; s++)
        if (strcmp(name, bw_scenarios[s]) == 0) return s;
    die("bindworker: unknown scenario %s", name);
    return -1;
}

static void bw_setup(bw_worker_t *w, int s, const char *cfg) {
    bw_count_t *c = &w->count[s];
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    agentao_transport t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.userdata = c;
    t.emit = bw_on_emit;
    agentao_error *err = NULL;
    check(agentao_agent_new(cfg, s == 1 ? &t : NULL, &w->agent[s], &err), err, "bindworker: agent_new");
    if (s == 2 || s == 4) {
        uint64_t id = 0;
        check(agentao_agent_add_host_event_observer(w->agent[s], bw_on_delta, c, NULL, &id, &err), err,
              "bindworker: add observer");
    }
}

/* One turn of scenario s, its units counted in w->count[s].n. */
static void bw_turn(bw_worker_t *w, int s) {
    agentao_agent *a = w->agent[s];
    bw_count_t *c = &w->count[s];
    agentao_error *err = NULL;
    if (s == 0) {
        c->done = 0;
        check(agentao_agent_stream(a, "go", -1, NULL, bw_on_delta, bw_on_done, c, &err), err,
              "bindworker: stream");
        pthread_mutex_lock(&c->mu);
        while (!c->done) pthread_cond_wait(&c->cv, &c->mu);
        pthread_mutex_unlock(&c->mu);
        if (c->status != AGENTAO_STATUS_OK) die("bindworker: stream ended %d", c->status);
        return;
    }
    char *text = NULL;
    check(agentao_agent_chat(a, "go", -1, NULL, &text, &err), err, "bindworker: chat");
    agentao_string_free(text);
    if (s == 3) atomic_fetch_add_explicit(&c->n, 1, memory_order_relaxed);
}

static int child_bindworker(void) {
    bw_worker_t w;
    memset(&w, 0, sizeof w);
    size_t cap = 0;
    char *line = NULL;
    ssize_t len;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((len = getline(&line, &cap, stdin)) > 0) {
        if (line[len - 1] == '\n') line[--len] = 0;
        char cmd[16], name[16];
        int turns = 0, off = 0;
        if (sscanf(line, "%15s %15s %n", cmd, name, &off) < 2) die("bindworker: bad command %s", line);
        int s = bw_scenario(name);
        if (strcmp(cmd, "setup") == 0) {
            bw_setup(&w, s, line + off);
            printf("ok\n");
            continue;
        }
        turns = atoi(line + off);
        int cg = strcmp(cmd, "cg") == 0;
        if (cg) bw_turn(&w, s), reset_history(w.agent[s]);
        if (cg) CALLGRIND_ZERO_STATS;
        atomic_store(&w.count[s].n, 0);
        double cpu = 0, wall = 0;
        for (int i = 0; i < turns; i++) {
            double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID), t0 = now_s();
            bw_turn(&w, s);
            cpu += cpu_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
            wall += now_s() - t0;
            reset_history(w.agent[s]);
        }
        if (cg) {
            CALLGRIND_DUMP_STATS;
            printf("ok\n");
        } else {
            printf("%.0f %.0f %ld\n", cpu * 1e9, wall * 1e9, atomic_load(&w.count[s].n));
        }
    }
    free(line);
    for (int s = 0; s < BW_SCENARIOS; s++)
        if (w.agent[s]) agentao_agent_free(w.agent[s]);
    return 0;
}

/* ------------------------------------------------------------------ the driver */

typedef struct {
    const char *lang;
    const char *api; /* what the worker drives, for the row names */
    pid_t pid;
    FILE *to, *from;
    double *cpu[BW_SCENARIOS], *wall[BW_SCENARIOS]; /* ns per unit, per round */
} bw_proc_t;

/* The CPU the workers share: --cpu N, else the last one. */
static int bw_cpu(void) { return g_cpu >= 0 ? g_cpu : (int)sysconf(_SC_NPROCESSORS_ONLN) - 1; }

/* Starts `argv` as a worker with its stdin and stdout on pipes, pinned to bw_cpu(). */
static void bw_spawn(bw_proc_t *p, char *const argv[]) {
    int in[2], out[2];
    /* Close-on-exec: a later worker must not hold this one's stdin open (it would never see
     * its end of input). dup2 clears the flag on the child's own 0 and 1. */
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) die("pipe");
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(bw_cpu(), &set);
        sched_setaffinity(0, sizeof set, &set);
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "bench: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    p->pid = pid;
    p->to = fdopen(in[1], "w");
    p->from = fdopen(out[0], "r");
    if (!p->to || !p->from) die("fdopen");
}

static void bw_stop(bw_proc_t *p) {
    fclose(p->to);
    fclose(p->from);
    int st = 0;
    waitpid(p->pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) die("bindings: the %s worker failed (status %d)", p->lang, st);
}

/* Sends one command and returns the worker's answer line (static storage). */
static const char *bw_ask(bw_proc_t *p, const char *cmd, const char *arg) {
    static char line[256];
    fprintf(p->to, "%s %s\n", cmd, arg);
    fflush(p->to);
    if (!fgets(line, sizeof line, p->from)) die("bindings: the %s worker died on `%s`", p->lang, cmd);
    return line;
}

/* The scenarios' configs: `turns` turns of each (the event script holds one tool round and one
 * answer per turn: the scripted provider does not rewind with the history). */
static char *bw_config(int s, int turns) {
    sbuf b = {0};
    if (s == 0 || s == 1) {
        char *script = script_text_stream(BW_DELTAS, 1, 1);
        char *cfg = config_scripted(script);
        free(script);
        return cfg;
    }
    if (s == 3) return config_scripted("{\"responses\":[],\"exhausted\":{\"text\":\"hello\"}}");
    sb_add(&b, "{\"responses\":[");
    for (int t = 0; t < turns; t++) {
        sb_add(&b, "%s{\"tool_calls\":[", t ? "," : "");
        for (int c = 1; c <= BW_CALLS; c++)
            sb_add(&b, "%s{\"id\":\"c%d_%d\",\"name\":\"read_file\",\"arguments\":{\"file_path\":\"f%d.txt\"}}",
                   c > 1 ? "," : "", t, c, c);
        sb_add(&b, "]},{\"text\":\"done\"}");
    }
    sb_add(&b, "]}");
    char *cfg = config_scripted(b.p);
    free(b.p);
    return cfg;
}

static char *bw_dir_of_self(const char *name) {
    static char path[1100];
    snprintf(path, sizeof path, "%s", g_self);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof path - (size_t)(slash ? slash + 1 - path : 0), "%s", name);
    return path;
}

/* Instructions per unit of scenario s in a worker run under callgrind. */
static double bw_callgrind(const char *lang, char *worker, char *worker_arg1, char *worker_arg2, int s,
                           const char *cfg, int turns) {
    char out[600], tool[] = "--tool=callgrind", atstart[] = "--instr-atstart=yes", outarg[760];
    snprintf(out, sizeof out, "%s/cg-bind-%s-%s", g_tmp, lang, bw_scenarios[s]);
    snprintf(outarg, sizeof outarg, "--callgrind-out-file=%s", out);
    char vg[] = "valgrind", quiet[] = "-q";
    char *argv[] = {vg, quiet, tool, atstart, outarg, worker, worker_arg1, worker_arg2, NULL};
    bw_proc_t p = {.lang = lang};
    bw_spawn(&p, argv);
    size_t n = strlen(cfg) + 32;
    char *setup = malloc(n);
    snprintf(setup, n, "%s %s", bw_scenarios[s], cfg);
    if (strncmp(bw_ask(&p, "setup", setup), "ok", 2) != 0) die("bindings: %s callgrind setup", lang);
    free(setup);
    char arg[32];
    snprintf(arg, sizeof arg, "%s %d", bw_scenarios[s], turns);
    bw_ask(&p, "cg", arg);
    bw_stop(&p);
    return callgrind_ir(out) / (turns * bw_units_per_turn(s));
}

static void bench_bindings(void) {
    int warm = 2, rounds = g_quick ? 5 : 15;
    char *cpp = strdup(bw_dir_of_self("bind-cpp")), *go = strdup(bw_dir_of_self("bind-go"));
    char *swift = strdup(bw_dir_of_self("bind-swift"));
    char child[] = "--child", kind[] = "bindworker", cgo_floor[] = "--cgo-floor";
    bw_proc_t procs[BW_MAX_WORKERS];
    int np = 0;
    /* BENCH_BIND_B=PATH adds a fifth worker, "B" (another build of a binding's worker, say
     * before and after a change): an A/B comparison in one run, under one load. */
    char *b_worker = getenv("BENCH_BIND_B");
    struct {
        const char *lang, *api;
        char *path, *arg1, *arg2;
    } cand[] = {
        {"C", "the C API", g_self, child, kind},
        {"C++", "bindings/cpp", cpp, NULL, NULL},
        {"Go", "bindings/go", go, NULL, NULL},
        {"Go cgo floor", "the C API from Go", go, cgo_floor, NULL},
        {"Swift", "bindings/swift", swift, NULL, NULL},
        {"B", "BENCH_BIND_B", b_worker, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        if (!cand[i].path) continue;
        if (access(cand[i].path, X_OK) != 0) {
            /* The Swift worker's build.sh leaves the reason it could not build one. */
            char why[512] = "", wpath[1200];
            snprintf(wpath, sizeof wpath, "%s.skipped", cand[i].path);
            FILE *wf = fopen(wpath, "r");
            if (wf) {
                if (fgets(why, sizeof why, wf)) why[strcspn(why, "\n")] = 0;
                fclose(wf);
            }
            if (why[0]) {
                printf("bindings: %s skipped: %s\n", cand[i].lang, why);
                continue;
            }
            printf("bindings: %s skipped: no worker at %s (bench/run.sh --only bindings builds it; "
                   "see its output for why it could not)\n",
                   cand[i].lang, cand[i].path);
            continue;
        }
        bw_proc_t *p = &procs[np++];
        memset(p, 0, sizeof *p);
        p->lang = cand[i].lang;
        p->api = cand[i].api;
        char *argv[] = {cand[i].path, cand[i].arg1, cand[i].arg2, NULL};
        bw_spawn(p, argv);
    }
    int total_turns[BW_SCENARIOS];
    for (int s = 0; s < BW_SCENARIOS; s++) {
        total_turns[s] = (warm + rounds) * bw_turns(s) + 1;
        char *cfg = bw_config(s, total_turns[s]);
        size_t n = strlen(bw_scenarios[s]) + strlen(cfg) + 2;
        char *arg = malloc(n);
        snprintf(arg, n, "%s %s", bw_scenarios[s], cfg);
        for (int k = 0; k < np; k++) {
            const char *r = bw_ask(&procs[k], "setup", arg);
            if (strncmp(r, "ok", 2) != 0) die("bindings: %s setup %s: %s", procs[k].lang, bw_scenarios[s], r);
            procs[k].cpu[s] = calloc((size_t)rounds, sizeof(double));
            procs[k].wall[s] = calloc((size_t)rounds, sizeof(double));
        }
        free(arg);
        free(cfg);
    }
    printf("bindings: workers pinned to CPU %d; load average before: ", bw_cpu());
    FILE *la = fopen("/proc/loadavg", "r");
    char lbuf[64] = "?";
    if (la && fgets(lbuf, sizeof lbuf, la)) printf("%s", lbuf);
    if (la) fclose(la);
    /* Alternating rounds: each scenario runs once per language per round, the language order
     * rotating so that none always follows the same one. */
    for (int r = 0; r < warm + rounds; r++) {
        for (int s = 0; s < BW_SCENARIOS; s++) {
            for (int j = 0; j < np; j++) {
                bw_proc_t *p = &procs[(j + r) % np];
                char arg[32];
                snprintf(arg, sizeof arg, "%s %d", bw_scenarios[s], bw_turns(s));
                double cpu = 0, wall = 0;
                long units = 0;
                const char *ans = bw_ask(p, "run", arg);
                if (sscanf(ans, "%lf %lf %ld", &cpu, &wall, &units) != 3)
                    die("bindings: %s %s: %s", p->lang, bw_scenarios[s], ans);
                double want_units = bw_turns(s) * bw_units_per_turn(s);
                if ((double)units != want_units)
                    die("bindings: %s %s counted %ld units, want %.0f", p->lang, bw_scenarios[s], units, want_units);
                if (r >= warm) {
                    p->cpu[s][r - warm] = cpu / want_units;
                    p->wall[s][r - warm] = wall / want_units;
                }
            }
        }
    }
    la = fopen("/proc/loadavg", "r");
    if (la && fgets(lbuf, sizeof lbuf, la)) printf("bindings: load average after: %s", lbuf);
    if (la) fclose(la);
    static const char *const what[] = {"per delta, null transport, stream API",
                                       "per delta, no-op emit (llm_text event), chat",
                                       "per host event, typed observer (C, C++: JSON)", "per turn, one-response chat",
                                       "per host event, JSON observer"};
    static const char *const target[] = {"+0.3 us", "+0.3 us", "+0.3 us", "+2 us", "+0.3 us"};
    for (int s = 0; s < BW_SCENARIOS; s++) {
        char name[192];
        snprintf(name, sizeof name, "bindings floor: C, CPU, %s", what[s]);
        row(name, "ns", stats(procs[0].cpu[s], rounds), "");
        snprintf(name, sizeof name, "bindings floor: C, wall, %s", what[s]);
        row(name, "ns", stats(procs[0].wall[s], rounds), "");
        /* Each round's difference language - C, paired before stats() sorts either. */
        double *diff = calloc((size_t)rounds, sizeof(double));
        for (int k = 1; k < np; k++) {
            snprintf(name, sizeof name, "  %s, CPU, %s", procs[k].lang, what[s]);
            for (int r = 0; r < rounds; r++) diff[r] = procs[k].cpu[s][r] - procs[0].cpu[s][r];
            stat_t cpu_over = stats(diff, rounds);
            for (int r = 0; r < rounds; r++) diff[r] = procs[k].wall[s][r] - procs[0].wall[s][r];
            stat_t wall_over = stats(diff, rounds);
            row(name, "ns", stats(procs[k].cpu[s], rounds), "");
            int floor = strcmp(procs[k].lang, "Go cgo floor") == 0;
            snprintf(name, sizeof name, "  %s - C (overhead), CPU, %s", procs[k].lang, what[s]);
            row(name, "ns", cpu_over, floor ? "" : target[s]);
            snprintf(name, sizeof name, "  %s - C (overhead), wall, %s", procs[k].lang, what[s]);
            row(name, "ns", wall_over, "");
        }
        /* The Go binding over the crossings any Go host pays: its own code's cost. */
        int go_k = -1, floor_k = -1;
        for (int k = 1; k < np; k++) {
            if (strcmp(procs[k].lang, "Go") == 0) go_k = k;
            if (strcmp(procs[k].lang, "Go cgo floor") == 0) floor_k = k;
        }
        if (go_k > 0 && floor_k > 0) {
            for (int r = 0; r < rounds; r++) diff[r] = procs[go_k].cpu[s][r] - procs[floor_k].cpu[s][r];
            snprintf(name, sizeof name, "  Go - Go cgo floor (the binding's own), CPU, %s", what[s]);
            row(name, "ns", stats(diff, rounds), "");
        }
        free(diff);
    }
    for (int k = 0; k < np; k++) bw_stop(&procs[k]);
    /* Instructions of the C++ layer against C: callgrind counts every thread's instructions,
     * so the difference is the wrapper's own work, free of the scheduler's noise. */
    if (np > 1 && strcmp(procs[1].lang, "C++") == 0 && system("valgrind --version >/dev/null 2>&1") == 0) {
        for (int s = 0; s < BW_SCENARIOS; s++) {
            if (s == 4) continue; /* C's and C++'s event-json is their event */
            int turns = s == 3 ? 50 : 2;
            char *cfg = bw_config(s, turns + 2);
            double c = bw_callgrind("c", g_self, child, kind, s, cfg, turns);
            double x = bw_callgrind("cpp", cpp, NULL, NULL, s, cfg, turns);
            free(cfg);
            char name[192];
            snprintf(name, sizeof name, "bindings floor: C, instructions, %s", what[s]);
            json_value(name, "instr", c);
            printf("%-44s %14.6g\n", name, c);
            snprintf(name, sizeof name, "  C++ - C (overhead), instructions, %s", what[s]);
            json_value(name, "instr", x - c);
            printf("%-44s %14.6g\n", name, x - c);
        }
    } else {
        printf("bindings: C++ instruction counts skipped (no C++ worker or no valgrind)\n");
    }
    free(cpp);
    free(go);
    free(swift);
}
