/* The FileSystem vtable: every file tool runs against an in-memory file system written in C,
 * whose workspace directory does not exist on disk, and the disk is never touched. Also: the
 * path policy still refuses paths outside the workspace before the file system sees them,
 * bad vtables and bad answers get a clear status, and userdata_free runs exactly once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

/* ---- an in-memory file system ------------------------------------------------------------ */

#define VFS_MAX 64

typedef struct vfs {
    pthread_mutex_t mu;
    char *paths[VFS_MAX]; /* absolute file paths */
    char *data[VFS_MAX];
    size_t len[VFS_MAX];
    size_t n;
    char *root;            /* the workspace */
    atomic_int calls;      /* every callback */
    atomic_int writes;
    atomic_int outside;    /* callbacks for a path outside the workspace */
    atomic_int freed;      /* userdata_free calls */
    int bad_answer;        /* 1: read answers with add_entry; 2: returns -7; 3: too much data */
    atomic_int hang;       /* read (1) or write (2) does not return while it is set */
    atomic_int hung;       /* calls that started hanging */
} vfs;

static void vfs_note(vfs *v, const char *path) {
    atomic_fetch_add(&v->calls, 1);
    size_t n = strlen(v->root);
    if (strncmp(path, v->root, n) != 0 || (path[n] != '/' && path[n] != '\0'))
        atomic_fetch_add(&v->outside, 1);
}

static long vfs_find(vfs *v, const char *path) {
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->paths[i], path) == 0) return (long)i;
    return -1;
}

/* A directory exists when it is the root or some file lies under it. */
static bool vfs_is_dir(vfs *v, const char *path) {
    if (strcmp(path, v->root) == 0) return true;
    size_t n = strlen(path);
    for (size_t i = 0; i < v->n; i++)
        if (strncmp(v->paths[i], path, n) == 0 && v->paths[i][n] == '/') return true;
    return false;
}

/* Does not return while `v->hang` is `which`. */
static void vfs_hang(vfs *v, int which) {
    if (atomic_load(&v->hang) != which) return;
    atomic_fetch_add(&v->hung, 1);
    while (atomic_load(&v->hang) == which) tu_sleep_ms(1);
}

static int32_t vfs_read(void *ud, const char *path, uint64_t max_bytes, agentao_fs_out *out) {
    vfs *v = ud;
    vfs_note(v, path);
    vfs_hang(v, 1);
    if (v->bad_answer == 1) {
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_fs_out_add_entry(out, "x", AGENTAO_FS_KIND_FILE, 1, &err),
                     AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "answers `list_dir`");
        agentao_error_free(err);
        return 0;
    }
    if (v->bad_answer == 2) return -7;
    if (v->bad_answer == 3 && max_bytes < 9000) {
        static const uint8_t big[9000];
        agentao_error *err = NULL;
        CHECK_STATUS(agentao_fs_out_set_data(out, big, (size_t)max_bytes + 1, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "answer a read of at most");
        agentao_error_free(err);
        return 0;
    }
    pthread_mutex_lock(&v->mu);
    long i = vfs_find(v, path);
    int32_t rc = 0;
    if (i < 0) {
        rc = vfs_is_dir(v, path) ? EISDIR : ENOENT;
    } else {
        size_t len = v->len[i];
        if ((uint64_t)len > max_bytes) len = (size_t)max_bytes;
        CHECK_STATUS(agentao_fs_out_set_data(out, (const uint8_t *)v->data[i], len, NULL), AGENTAO_STATUS_OK);
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

static int32_t vfs_write(void *ud, const char *path, const uint8_t *data, size_t len, bool append) {
    vfs *v = ud;
    vfs_note(v, path);
    vfs_hang(v, 2);
    atomic_fetch_add(&v->writes, 1);
    pthread_mutex_lock(&v->mu);
    long i = vfs_find(v, path);
    int32_t rc = 0;
    if (i < 0) {
        if (v->n == VFS_MAX) {
            rc = ENOSPC;
        } else {
            i = (long)v->n++;
            v->paths[i] = strdup(path);
            v->data[i] = NULL;
            v->len[i] = 0;
        }
    }
    if (rc == 0) {
        size_t keep = append ? v->len[i] : 0;
        char *buf = malloc(keep + len + 1);
        if (keep) memcpy(buf, v->data[i], keep);
        if (len) memcpy(buf + keep, data, len);
        buf[keep + len] = '\0';
        free(v->data[i]);
        v->data[i] = buf;
        v->len[i] = keep + len;
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

/* The child of `dir` that `path` lies under ("sub" for dir/sub/x), or NULL. malloc'd. */
static char *child_name(const char *dir, const char *path, bool *is_leaf) {
    size_t n = strlen(dir);
    if (strncmp(path, dir, n) != 0 || path[n] != '/') return NULL;
    const char *rest = path + n + 1;
    const char *slash = strchr(rest, '/');
    *is_leaf = slash == NULL;
    return slash ? strndup(rest, (size_t)(slash - rest)) : strdup(rest);
}

static int32_t vfs_list_dir(void *ud, const char *path, agentao_fs_out *out) {
    vfs *v = ud;
    vfs_note(v, path);
    pthread_mutex_lock(&v->mu);
    int32_t rc = 0;
    if (vfs_find(v, path) >= 0) {
        rc = ENOTDIR;
    } else if (!vfs_is_dir(v, path)) {
        rc = ENOENT;
    } else {
        char *seen[VFS_MAX];
        size_t n_seen = 0;
        for (size_t i = 0; i < v->n; i++) {
            bool leaf = false;
            char *name = child_name(path, v->paths[i], &leaf);
            if (!name) continue;
            bool dup = false;
            for (size_t j = 0; j < n_seen; j++) dup |= strcmp(seen[j], name) == 0;
            if (dup) {
                free(name);
                continue;
            }
            seen[n_seen++] = name;
            CHECK_STATUS(agentao_fs_out_add_entry(out, name, leaf ? AGENTAO_FS_KIND_FILE : AGENTAO_FS_KIND_DIR,
                                                  leaf ? v->len[i] : 0, NULL),
                         AGENTAO_STATUS_OK);
        }
        for (size_t j = 0; j < n_seen; j++) free(seen[j]);
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

static int32_t vfs_walk(void *ud, const char *base, int32_t max_depth, agentao_fs_out *out) {
    vfs *v = ud;
    vfs_note(v, base);
    pthread_mutex_lock(&v->mu);
    int32_t rc = 0;
    if (!vfs_is_dir(v, base)) {
        rc = ENOENT;
    } else {
        size_t n = strlen(base);
        char *dirs[VFS_MAX * 4];
        size_t n_dirs = 0;
        for (size_t i = 0; i < v->n; i++) {
            const char *p = v->paths[i];
            if (strncmp(p, base, n) != 0 || p[n] != '/') continue;
            /* Every directory between base and the file, then the file. */
            int depth = 0;
            for (const char *s = p + n + 1; (s = strchr(s, '/')); s++) {
                depth++;
                if (max_depth >= 0 && depth > max_depth) break;
                char *d = strndup(p, (size_t)(s - p));
                bool dup = false;
                for (size_t j = 0; j < n_dirs; j++) dup |= strcmp(dirs[j], d) == 0;
                if (dup) {
                    free(d);
                    continue;
                }
                dirs[n_dirs++] = d;
                CHECK_STATUS(agentao_fs_out_add_path(out, d, AGENTAO_FS_KIND_DIR, NULL), AGENTAO_STATUS_OK);
            }
            if (max_depth < 0 || depth + 1 <= max_depth)
                CHECK_STATUS(agentao_fs_out_add_path(out, p, AGENTAO_FS_KIND_FILE, NULL), AGENTAO_STATUS_OK);
        }
        for (size_t j = 0; j < n_dirs; j++) free(dirs[j]);
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

static int32_t vfs_stat(void *ud, const char *path, agentao_fs_out *out) {
    vfs *v = ud;
    vfs_note(v, path);
    pthread_mutex_lock(&v->mu);
    long i = vfs_find(v, path);
    int32_t rc = 0;
    /* An old mtime: glob then lists alphabetically. */
    if (i >= 0)
        CHECK_STATUS(agentao_fs_out_set_stat(out, v->len[i], 1000.0, AGENTAO_FS_KIND_FILE, NULL), AGENTAO_STATUS_OK);
    else if (vfs_is_dir(v, path))
        CHECK_STATUS(agentao_fs_out_set_stat(out, 0, 1000.0, AGENTAO_FS_KIND_DIR, NULL), AGENTAO_STATUS_OK);
    else
        rc = ENOENT;
    pthread_mutex_unlock(&v->mu);
    return rc;
}

static bool vfs_exists(void *ud, const char *path) {
    vfs *v = ud;
    vfs_note(v, path);
    pthread_mutex_lock(&v->mu);
    bool yes = vfs_find(v, path) >= 0 || vfs_is_dir(v, path);
    pthread_mutex_unlock(&v->mu);
    return yes;
}

static void vfs_free(void *ud) { atomic_fetch_add(&((vfs *)ud)->freed, 1); }

static void vfs_init(vfs *v, const char *root) {
    memset(v, 0, sizeof *v);
    pthread_mutex_init(&v->mu, NULL);
    v->root = strdup(root);
}

static void vfs_destroy(vfs *v) {
    for (size_t i = 0; i < v->n; i++) {
        free(v->paths[i]);
        free(v->data[i]);
    }
    free(v->root);
    pthread_mutex_destroy(&v->mu);
}

static const char *vfs_get(vfs *v, const char *rel) {
    char *p = tu_printf("%s/%s", v->root, rel);
    long i = vfs_find(v, p);
    free(p);
    return i < 0 ? NULL : v->data[i];
}

static agentao_file_system vfs_vtable(vfs *v) {
    agentao_file_system fs = {
        .struct_size = sizeof(agentao_file_system),
        .userdata = v,
        .userdata_free = vfs_free,
        .read = vfs_read,
        .write = vfs_write,
        .list_dir = vfs_list_dir,
        .walk = vfs_walk,
        .stat = vfs_stat,
        .exists = vfs_exists,
    };
    return fs;
}

/* ---- the turns --------------------------------------------------------------------------- */

#define CALL(id, name, args) "{\"tool_calls\":[{\"id\":\"" id "\",\"name\":\"" name "\",\"arguments\":" args "}]}"

static const char *SCRIPT =
    CALL("w1", "write_file", "{\"file_path\":\"a.txt\",\"content\":\"hello\\nworld\\n\"}") ","
    CALL("w2", "write_file", "{\"file_path\":\"sub/deep/b.md\",\"content\":\"alpha beta\\n\"}") ","
    CALL("w3", "write_file", "{\"file_path\":\"a.txt\",\"content\":\"more\\n\",\"append\":true}") ","
    CALL("r1", "read_file", "{\"file_path\":\"a.txt\"}") ","
    CALL("e1", "replace", "{\"file_path\":\"a.txt\",\"old_text\":\"world\",\"new_text\":\"earth\"}") ","
    CALL("l1", "list_directory", "{}") ","
    CALL("l2", "list_directory", "{\"recursive\":true}") ","
    CALL("g1", "glob", "{\"pattern\":\"**/*.md\"}") ","
    CALL("s1", "search_file_content", "{\"pattern\":\"beta\"}") ","
    CALL("x1", "write_file", "{\"file_path\":\"../escape.txt\",\"content\":\"x\"}") ","
    CALL("x2", "read_file", "{\"file_path\":\"../../etc/hostname\"}") ","
    CALL("m1", "read_file", "{\"file_path\":\"missing.txt\"}") ","
    CALL("big", "read_file", "{\"file_path\":\"big.txt\"}") ","
    "{\"text\":\"done\"}";

/* 2,000 lines of 41 bytes: read_file's result is over 40,000 characters, so it is spilled. */
static char *long_text(void) {
    size_t n = 2000 * 41;
    char *big = malloc(n + 1);
    for (size_t l = 0; l < 2000; l++) snprintf(big + l * 41, 42, "%040zu\n", l);
    big[n] = '\0';
    return big;
}

/* Cancels `tok` once a callback of `fs` started hanging, and notes when. Should none start
 * (the turn went another way), it lets the file system go instead, so the test fails rather
 * than hangs. The wait is long: under valgrind the turn takes many seconds to get there. */
typedef struct canceller {
    agentao_cancel_token *tok;
    vfs *fs;
    uint64_t cancelled_at;
} canceller;

static void *cancel_when_hung(void *arg) {
    canceller *c = arg;
    if (!tu_wait_count(&c->fs->hung, 1, 300000)) {
        atomic_store(&c->fs->hang, 0);
        return NULL;
    }
    tu_sleep_ms(50);
    c->cancelled_at = tu_now_ms();
    agentao_cancel_token_cancel(c->tok, "host gave up");
    return NULL;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* A walk that answers paths climbing out of the walked directory (and one plain file): every
 * climbing path is refused at once. */
static atomic_int climb_refused;
static int32_t climbing_walk(void *ud, const char *base, int32_t max_depth, agentao_fs_out *out) {
    (void)ud;
    (void)max_depth;
    const char *tails[] = {"/../../../../../../etc/passwd", "/./../../../../etc/passwd",
                           "/sub/../../../../../../etc/passwd", "/sub/./x.txt", "/sub/.."};
    for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
        char *p = tu_printf("%s%s", base, tails[i]);
        if (agentao_fs_out_add_path(out, p, AGENTAO_FS_KIND_FILE, NULL) == AGENTAO_STATUS_INVALID_ARGUMENT)
            atomic_fetch_add(&climb_refused, 1);
        free(p);
    }
    char *ok = tu_printf("%s/inside.txt", base);
    CHECK_STATUS(agentao_fs_out_add_path(out, ok, AGENTAO_FS_KIND_FILE, NULL), AGENTAO_STATUS_OK);
    free(ok);
    return 0;
}

/* Skills are found and activated through the host's file system: the skill exists only in
 * memory, and `agentao_agent_skills` and `activate_skill` both see it (docs/skills.md). */
static void skills_through_the_virtual_file_system(void) {
    tu_section("skills through a virtual file system");
    const char *parent = tu_workspace();
    char *root = tu_printf("%s/ws", parent);
    CHECK(mkdir(root, 0700) == 0);
    char *cfg = tu_config(root,
                          CALL("k1", "activate_skill", "{\"skill_name\":\"memo\",\"task_description\":\"t\"}") ","
                          "{\"text\":\"done\"}",
                          "\"skills\":{\"user_directory\":null}");
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    /* Found on the local disk first: nothing there. */
    char *json = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_skills(a, &json, &err), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(json, "\"skills\":[]");
    agentao_string_free(json);
    json = NULL;
    vfs v;
    vfs_init(&v, root);
    agentao_file_system fs = vfs_vtable(&v);
    CHECK_STATUS(agentao_agent_set_file_system(a, &fs, &err), AGENTAO_STATUS_OK);
    CHECK(rmdir(root) == 0);
    /* Another file system: the skills are found again, through it. */
    const char *skill = "---\nname: memo\ndescription: Write a memo.\n---\n# Memo\nOnly in memory.\n";
    char *path = tu_printf("%s/skills/memo/SKILL.md", root);
    CHECK(vfs_write(&v, path, (const uint8_t *)skill, strlen(skill), false) == 0);

    CHECK_STATUS(agentao_agent_skills(a, &json, &err), AGENTAO_STATUS_OK);
    CHECK_CONTAINS(json, TU_KV("name", "memo"));
    CHECK_CONTAINS(json, path);
    agentao_string_free(json);
    char *text = tu_chat(a, "memo");
    CHECK_STR_EQ(text, "done");
    agentao_string_free(text);
    char *hist = tu_history(a);
    CHECK_CONTAINS(hist, "Skill Activated: memo");
    CHECK_CONTAINS(hist, "# Memo\\nOnly in memory.");
    free(hist);
    CHECK_MSG(!tu_file_exists(root), "the workspace reappeared on disk");
    CHECK_MSG(atomic_load(&v.outside) == 0, "the file system saw %d paths outside the workspace",
              atomic_load(&v.outside));
    agentao_agent_free(a);
    /* The turn's calls have ended, so the free lets go of the file system itself: its
     * userdata_free has run when the free returns (a blocking thread's last hold once
     * outlived the turn's end, so it ran just after, in one run in ~4,000). */
    CHECK_MSG(atomic_load(&v.freed) == 1, "userdata_free ran %d times", atomic_load(&v.freed));
    vfs_destroy(&v);
    free(path);
    free(root);
}

int main(void) {
    skills_through_the_virtual_file_system();
    tu_section("every file tool through a virtual file system");
    const char *parent = tu_workspace();
    char *root = tu_printf("%s/ws", parent);
    CHECK(mkdir(root, 0700) == 0);
    char *cfg = tu_config(root, SCRIPT, NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    CHECK(a != NULL);
    vfs v;
    vfs_init(&v, root);
    agentao_file_system fs = vfs_vtable(&v);
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_file_system(a, &fs, &err), AGENTAO_STATUS_OK);
    CHECK(err == NULL);
    /* From here the workspace exists only in memory. */
    CHECK(rmdir(root) == 0);
    /* A file whose read result is over 40,000 characters: the full result is spilled. */
    {
        char *big = long_text();
        char *big_path = tu_printf("%s/big.txt", root);
        CHECK(vfs_write(&v, big_path, (const uint8_t *)big, strlen(big), false) == 0);
        free(big_path);
        free(big);
    }

    char *text = NULL;
    CHECK_STATUS(agentao_agent_chat(a, "use every file tool", -1, NULL, &text, &err), AGENTAO_STATUS_OK);
    CHECK_STR_EQ(text, "done");
    agentao_string_free(text);
    agentao_error_free(err);
    err = NULL;

    char *hist = tu_history(a);
    CHECK_CONTAINS(hist, "Successfully wrote to a.txt");
    CHECK_CONTAINS(hist, "Successfully wrote to sub/deep/b.md");
    CHECK_CONTAINS(hist, "Successfully appended to a.txt");
    CHECK_CONTAINS(hist, "(3 lines)");
    CHECK_CONTAINS(hist, "     2\\tworld");
    CHECK_CONTAINS(hist, "Replaced 1 occurrence(s) in a.txt");
    CHECK_CONTAINS(hist, "[DIR]  sub/\\n[FILE] a.txt (17 bytes)");
    CHECK_CONTAINS(hist, "sub/deep/b.md (11 bytes)");
    CHECK_CONTAINS(hist, "Found 1 file(s):\\n\\nsub/deep/b.md");
    CHECK_CONTAINS(hist, "Found 1 match(es):\\n\\nsub/deep/b.md:1:alpha beta");
    CHECK_CONTAINS(hist, "Error: PathPolicy: refused '../escape.txt'");
    CHECK_CONTAINS(hist, "Error: PathPolicy: refused '../../etc/hostname'");
    CHECK_CONTAINS(hist, "Error: File missing.txt does not exist");
    CHECK_CONTAINS(hist, "[Output truncated: ");
    CHECK_CONTAINS(hist, "/.agentao/tool-outputs/read_file_");
    free(hist);
    /* The spilled copy went to the host file system too. */
    bool spilled = false;
    for (size_t i = 0; i < v.n; i++) spilled |= strstr(v.paths[i], "/.agentao/tool-outputs/read_file_") != NULL;
    CHECK_MSG(spilled, "the full result was not saved through the file system");

    /* The edits landed in memory. */
    CHECK_STR_EQ(vfs_get(&v, "a.txt"), "hello\nearth\nmore\n");
    CHECK_STR_EQ(vfs_get(&v, "sub/deep/b.md"), "alpha beta\n");
    CHECK_MSG(atomic_load(&v.outside) == 0, "the file system saw %d paths outside the workspace",
              atomic_load(&v.outside));
    CHECK(atomic_load(&v.writes) >= 4);
    printf("virtual file system callbacks: %d\n", atomic_load(&v.calls));

    /* The disk was never touched: no workspace, nothing next to it. */
    CHECK_MSG(!tu_file_exists(root), "the workspace was created on disk");
    CHECK_MSG(count_entries(parent) == 0, "something was written next to the workspace");

    tu_section("a refused install releases the vtable at once");
    vfs other;
    vfs_init(&other, root);
    agentao_file_system ofs = vfs_vtable(&other);
    CHECK_STATUS(agentao_agent_set_file_system(NULL, &ofs, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK(atomic_load(&other.freed) == 1);

    tu_section("bad struct_size");
    ofs = vfs_vtable(&other);
    ofs.struct_size = 4;
    CHECK_STATUS(agentao_agent_set_file_system(a, &ofs, &err), AGENTAO_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "agentao_file_system.struct_size is 4");
    agentao_error_free(err);
    err = NULL;
    CHECK(atomic_load(&other.freed) == 2);
    CHECK(atomic_load(&v.freed) == 0);
    vfs_destroy(&other);

    tu_section("setters outside their callback's slot, NULL and bad values");
    CHECK_STATUS(agentao_fs_out_set_data(NULL, NULL, 0, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_fs_out_add_entry(NULL, "x", 1, 0, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_fs_out_add_path(NULL, "/x", 1, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(agentao_fs_out_set_stat(NULL, 0, 0.0, 1, NULL), AGENTAO_STATUS_NULL_ARGUMENT);
    agentao_agent_free(a);
    CHECK_MSG(atomic_load(&v.freed) == 1, "userdata_free ran %d times", atomic_load(&v.freed));

    tu_section("a wrong answer, a bad code and an oversized answer fail the tool, not the turn");
    static const char *ONE = CALL("r1", "read_file", "{\"file_path\":\"a.txt\"}") ",{\"text\":\"ok\"}";
    static const char *BIG = CALL("rb", "read_file", "{\"file_path\":\"big.txt\"}") ",{\"text\":\"ok\"}";
#define READ_BIG(n) "{\"id\":\"b" n "\",\"name\":\"read_file\",\"arguments\":{\"file_path\":\"big" n ".txt\"}}"
    /* Five long results in one batch (five files: the same call three times is a doom loop):
     * five full copies to write. */
    static const char *FIVE_BIG = "{\"tool_calls\":[" READ_BIG("1") "," READ_BIG("2") "," READ_BIG("3") ","
                                  READ_BIG("4") "," READ_BIG("5") "]},{\"text\":\"ok\"}";
    vfs bad;
    vfs_init(&bad, root);
    bad.n = 1;
    bad.paths[0] = tu_printf("%s/a.txt", root);
    bad.data[0] = strdup("0123456789");
    bad.len[0] = 10;
    for (int mode = 1; mode <= 3; mode++) {
        CHECK(mkdir(root, 0700) == 0);
        cfg = tu_config(root, ONE, NULL);
        a = tu_agent(cfg, NULL);
        free(cfg);
        CHECK(rmdir(root) == 0);
        fs = vfs_vtable(&bad);
        fs.userdata_free = NULL;
        CHECK_STATUS(agentao_agent_set_file_system(a, &fs, NULL), AGENTAO_STATUS_OK);
        bad.bad_answer = mode;
        CHECK_STATUS(agentao_agent_chat(a, "read", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        CHECK_STR_EQ(text, "ok");
        agentao_string_free(text);
        hist = tu_history(a);
        if (mode == 1) CHECK_CONTAINS(hist, "the host file system's `read` answer was refused");
        if (mode == 2) CHECK_CONTAINS(hist, "returned -7, which is neither 0 nor an errno value");
        if (mode == 3) CHECK_CONTAINS(hist, "answer a read of at most");
        free(hist);
        agentao_agent_free(a);
    }
    vfs_destroy(&bad);

    tu_section("a callback that never returns does not hold a cancelled turn");
    /* 1: the read of a small file; 2: the write of a long result's full copy; 3: the writes
     * of five long results' copies, which share the one grace of the turn. */
    for (int which = 1; which <= 3; which++) {
        CHECK(mkdir(root, 0700) == 0);
        cfg = tu_config(root, which == 1 ? ONE : which == 2 ? BIG : FIVE_BIG, NULL);
        a = tu_agent(cfg, NULL);
        free(cfg);
        CHECK(rmdir(root) == 0);
        vfs stuck;
        vfs_init(&stuck, root);
        char *small_path = tu_printf("%s/a.txt", root), *big_path = tu_printf("%s/big.txt", root);
        CHECK(vfs_write(&stuck, small_path, (const uint8_t *)"0123456789", 10, false) == 0);
        char *big = long_text();
        CHECK(vfs_write(&stuck, big_path, (const uint8_t *)big, strlen(big), false) == 0);
        for (int n = 1; n <= 5; n++) {
            char *path = tu_printf("%s/big%d.txt", root, n);
            CHECK(vfs_write(&stuck, path, (const uint8_t *)big, strlen(big), false) == 0);
            free(path);
        }
        free(big);
        free(small_path);
        free(big_path);
        atomic_store(&stuck.hang, which == 1 ? 1 : 2);
        fs = vfs_vtable(&stuck);
        CHECK_STATUS(agentao_agent_set_file_system(a, &fs, NULL), AGENTAO_STATUS_OK);
        canceller c = {.tok = agentao_cancel_token_new(), .fs = &stuck};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, cancel_when_hung, &c) == 0);
        text = NULL;
        CHECK_STATUS(agentao_agent_chat(a, "read", -1, c.tok, &text, NULL), AGENTAO_STATUS_CANCELLED);
        uint64_t returned = tu_now_ms();
        CHECK(pthread_join(t, NULL) == 0);
        CHECK_MSG(c.cancelled_at != 0, "the callback (%d) was never called", which);
        /* The library gives a call stuck in host code a grace of 2 s after the cancel (the
         * bound leaves room for valgrind). */
        CHECK_MSG(returned - c.cancelled_at < 8000, "the cancelled turn (%d) returned %llu ms after the cancel",
                  which, (unsigned long long)(returned - c.cancelled_at));
        agentao_string_free(text);
        hist = tu_history(a);
        if (which == 1) {
            CHECK_CONTAINS(hist, "(the call did not end within 2 s of the cancel and was left behind)");
        } else {
            /* The results went on without their saved copies (which the excerpt's head would
             * name before its closing bracket). */
            int excerpts = 0;
            for (const char *at = hist;
                 (at = strstr(at, " chars total, showing first 8,000 and last 32,000 chars.]"));
                 at++)
                excerpts++;
            CHECK_MSG(excerpts == (which == 2 ? 1 : 5), "%d excerpts without a saved copy in the history", excerpts);
            CHECK_MSG(strstr(hist, "Full output saved to") == NULL, "a copy that was never saved is named");
            /* The grace is the turn's: no copy is begun once it is over. */
            CHECK_MSG(atomic_load(&stuck.hung) == 1, "%d copies were begun", atomic_load(&stuck.hung));
        }
        free(hist);
        agentao_agent_free(a);
        /* The stuck callback keeps the userdata until it returns; then it is released once. */
        CHECK(atomic_load(&stuck.freed) == 0);
        atomic_store(&stuck.hang, 0);
        CHECK_MSG(tu_wait_count(&stuck.freed, 1, 10000), "userdata_free ran %d times", atomic_load(&stuck.freed));
        agentao_cancel_token_free(c.tok);
        vfs_destroy(&stuck);
    }

    tu_section("NULL restores the local file system");
    cfg = tu_config(parent, CALL("w1", "write_file", "{\"file_path\":\"real.txt\",\"content\":\"disk\"}") ",{\"text\":\"ok\"}", NULL);
    a = tu_agent(cfg, NULL);
    free(cfg);
    vfs again;
    vfs_init(&again, parent);
    fs = vfs_vtable(&again);
    CHECK_STATUS(agentao_agent_set_file_system(a, &fs, NULL), AGENTAO_STATUS_OK);
    CHECK_STATUS(agentao_agent_set_file_system(a, NULL, NULL), AGENTAO_STATUS_OK);
    CHECK(atomic_load(&again.freed) == 1);
    CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
    agentao_string_free(text);
    char *real = tu_printf("%s/real.txt", parent);
    char *content = tu_read_file(real);
    CHECK_STR_EQ(content, "disk");
    free(content);
    free(real);
    CHECK(atomic_load(&again.calls) == 0);
    agentao_agent_free(a);
    vfs_destroy(&again);

    tu_section("a walk answer cannot climb out of the walked directory");
    {
        /* Only `walk` is the host's; reads go to the disk, so a path that got through would be
         * read from the real /etc. */
        CHECK(mkdir(root, 0700) == 0 || errno == EEXIST);
        char *inside = tu_printf("%s/inside.txt", root);
        FILE *f = fopen(inside, "w");
        CHECK(f != NULL);
        fputs("root: inside\n", f);
        fclose(f);
        free(inside);
        cfg = tu_config(root,
                        CALL("s1", "search_file_content", "{\"pattern\":\"root:\"}") ","
                        CALL("g1", "glob", "{\"pattern\":\"**/*\"}") ",{\"text\":\"done\"}",
                        NULL);
        a = tu_agent(cfg, NULL);
        free(cfg);
        agentao_file_system walk_only = {.struct_size = sizeof(agentao_file_system), .walk = climbing_walk};
        CHECK_STATUS(agentao_agent_set_file_system(a, &walk_only, NULL), AGENTAO_STATUS_OK);
        CHECK_STATUS(agentao_agent_chat(a, "go", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
        agentao_string_free(text);
        hist = tu_history(a);
        CHECK_MSG(strstr(hist, "root:x:") == NULL, "a file outside the workspace was read: %s", hist);
        CHECK_MSG(strstr(hist, "Found ") == NULL, "a path outside the workspace was listed: %s", hist);
        /* A bad path spoils the whole answer, as any refused answer does: the tool fails. */
        CHECK_CONTAINS(hist, "the host file system's `walk` answer was refused");
        CHECK_CONTAINS(hist, "has a `.` or `..` component");
        free(hist);
        CHECK_MSG(atomic_load(&climb_refused) == 2 * 5, "%d of 10 climbing paths refused",
                  atomic_load(&climb_refused));
        agentao_agent_free(a);
    }

    vfs_destroy(&v);
    free(root);
    return tu_finish("test_virtual_fs");
}
