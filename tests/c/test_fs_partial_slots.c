/* A host file system that fills in only some slots, on a checkout holding links out of the
 * workspace: every mix of host and local slots (read, write, list_dir, walk, stat, exists),
 * with an honest walk (links listed, not descended) and one that follows links, times every
 * file tool. The host slots are honest pass-throughs to the real disk, so a path that got past
 * the path policy would be read, listed or written through the link. Nothing outside the
 * workspace may reach the model or change. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

#define SECRET "needle OUTSIDE-SECRET-7f3a\n"

/* ---- host slots over the real disk ------------------------------------------------------- */

typedef struct host {
    bool walk_follows_links; /* descend into symlinked directories (against the header) */
    atomic_int calls;
} host;

static int32_t h_read(void *ud, const char *path, uint64_t max_bytes, agentao_fs_out *out) {
    atomic_fetch_add(&((host *)ud)->calls, 1);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        close(fd);
        return EISDIR;
    }
    size_t want = (uint64_t)st.st_size < max_bytes ? (size_t)st.st_size : (size_t)max_bytes;
    uint8_t *buf = malloc(want + 1);
    ssize_t n = read(fd, buf, want);
    close(fd);
    int32_t rc = n < 0 ? EIO : 0;
    if (rc == 0) CHECK_STATUS(agentao_fs_out_set_data(out, buf, (size_t)n, NULL), AGENTAO_STATUS_OK);
    free(buf);
    return rc;
}

static int32_t h_write(void *ud, const char *path, const uint8_t *data, size_t len, bool append) {
    atomic_fetch_add(&((host *)ud)->calls, 1);
    FILE *f = fopen(path, append ? "ab" : "wb");
    if (!f) return errno;
    size_t n = fwrite(data, 1, len, f);
    fclose(f);
    return n == len ? 0 : EIO;
}

static int32_t kind_of(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return AGENTAO_FS_KIND_OTHER;
    return S_ISDIR(st.st_mode) ? AGENTAO_FS_KIND_DIR : S_ISREG(st.st_mode) ? AGENTAO_FS_KIND_FILE : AGENTAO_FS_KIND_OTHER;
}

static int32_t h_list_dir(void *ud, const char *path, agentao_fs_out *out) {
    atomic_fetch_add(&((host *)ud)->calls, 1);
    DIR *d = opendir(path);
    if (!d) return errno;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = tu_printf("%s/%s", path, e->d_name);
        struct stat st;
        uint64_t size = stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
        CHECK_STATUS(agentao_fs_out_add_entry(out, e->d_name, kind_of(p), size, NULL), AGENTAO_STATUS_OK);
        free(p);
    }
    closedir(d);
    return 0;
}

static void walk_into(host *h, const char *dir, int depth, int32_t max_depth, agentao_fs_out *out) {
    if (max_depth >= 0 && depth > max_depth) return;
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *p = tu_printf("%s/%s", dir, e->d_name);
        struct stat lst;
        bool link = lstat(p, &lst) == 0 && S_ISLNK(lst.st_mode);
        int32_t kind = kind_of(p);
        CHECK_STATUS(agentao_fs_out_add_path(out, p, kind, NULL), AGENTAO_STATUS_OK);
        if (kind == AGENTAO_FS_KIND_DIR && (!link || h->walk_follows_links))
            walk_into(h, p, depth + 1, max_depth, out);
        free(p);
    }
    closedir(d);
}

static int32_t h_walk(void *ud, const char *base, int32_t max_depth, agentao_fs_out *out) {
    host *h = ud;
    atomic_fetch_add(&h->calls, 1);
    if (kind_of(base) != AGENTAO_FS_KIND_DIR) return ENOENT;
    walk_into(h, base, 1, max_depth, out);
    return 0;
}

static int32_t h_stat(void *ud, const char *path, agentao_fs_out *out) {
    atomic_fetch_add(&((host *)ud)->calls, 1);
    struct stat st;
    if (stat(path, &st) != 0) return errno;
    CHECK_STATUS(agentao_fs_out_set_stat(out, (uint64_t)st.st_size, (double)st.st_mtime, kind_of(path), NULL),
                 AGENTAO_STATUS_OK);
    return 0;
}

static bool h_exists(void *ud, const char *path) {
    atomic_fetch_add(&((host *)ud)->calls, 1);
    struct stat st;
    return stat(path, &st) == 0;
}

enum { SL_READ = 1, SL_WRITE = 2, SL_LIST = 4, SL_WALK = 8, SL_STAT = 16, SL_EXISTS = 32, SL_ALL = 63, NO_FS = 64 };

static agentao_file_system vtable(host *h, unsigned slots) {
    agentao_file_system fs = {.struct_size = sizeof(agentao_file_system), .userdata = h};
    if (slots & SL_READ) fs.read = h_read;
    if (slots & SL_WRITE) fs.write = h_write;
    if (slots & SL_LIST) fs.list_dir = h_list_dir;
    if (slots & SL_WALK) fs.walk = h_walk;
    if (slots & SL_STAT) fs.stat = h_stat;
    if (slots & SL_EXISTS) fs.exists = h_exists;
    return fs;
}

/* ---- the calls ---------------------------------------------------------------------------- */

#define CALL(id, name, args) "{\"tool_calls\":[{\"id\":\"" id "\",\"name\":\"" name "\",\"arguments\":" args "}]}"

static const char *READS =
    CALL("r1", "read_file", "{\"file_path\":\"evil\"}") ","
    CALL("r2", "read_file", "{\"file_path\":\"evildir/secret.txt\"}") ","
    CALL("r3", "read_file", "{\"file_path\":\"sub/evil2\"}") ","
    CALL("l1", "list_directory", "{}") ","
    CALL("l2", "list_directory", "{\"recursive\":true}") ","
    CALL("l3", "list_directory", "{\"directory_path\":\"sub\"}") ","
    CALL("g1", "glob", "{\"pattern\":\"**/*\"}") ","
    CALL("g2", "glob", "{\"pattern\":\"*\"}") ","
    CALL("g3", "glob", "{\"pattern\":\"**/sec*et*\"}") ","
    CALL("g4", "glob", "{\"pattern\":\"evildir/*\"}") ","
    CALL("s1", "search_file_content", "{\"pattern\":\"needle\"}") ","
    CALL("s2", "search_file_content", "{\"pattern\":\"needle\",\"file_pattern\":\"evil*\"}") ","
    CALL("s3", "search_file_content", "{\"pattern\":\"needle\",\"directory\":\"evildir\"}") ","
    CALL("s4", "search_file_content", "{\"pattern\":\"needle\",\"directory\":\"sub\"}") ","
    "{\"text\":\"done\"}";

static const char *WRITES =
    CALL("w1", "write_file", "{\"file_path\":\"evil\",\"content\":\"pwned\"}") ","
    CALL("w2", "write_file", "{\"file_path\":\"evildir/new.txt\",\"content\":\"pwned\"}") ","
    CALL("w3", "write_file", "{\"file_path\":\"sub/evil2\",\"content\":\"pwned\",\"append\":true}") ","
    CALL("e1", "replace", "{\"file_path\":\"evil\",\"old_text\":\"needle\",\"new_text\":\"pwned\"}") ","
    CALL("e2", "replace", "{\"file_path\":\"sub/evil2\",\"old_text\":\"needle\",\"new_text\":\"pwned\"}") ","
    CALL("w4", "write_file", "{\"file_path\":\"fine.txt\",\"content\":\"ok\"}") ","
    "{\"text\":\"done\"}";

/* The content of the tool result for call `id` in the history JSON, malloc'd ("" if none). */
static char *result_of(const char *hist, const char *id) {
    char *key = tu_printf("\"tool_call_id\":\"%s\"", id);
    const char *at = strstr(hist, key);
    free(key);
    if (!at) return strdup("");
    /* The message object around the id: back to its `{`, then its `content`. */
    const char *start = at;
    while (start > hist && *start != '{') start--;
    char *c = tu_json_str(start, "content");
    return c ? c : strdup("");
}

static int case_failures(void) { return atomic_load(&tu_failures); }

static bool has(const char *r, const char *needle) { return strstr(r, needle) != NULL; }

static void check_reads(const char *hist, const char *label) {
    int before = case_failures();
    static const char *ids[] = {"r1", "r2", "r3", "l1", "l2", "l3", "g1", "g2", "g3", "g4", "s1", "s2", "s3", "s4"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        const char *id = ids[i];
        char *r = result_of(hist, id);
        CHECK_MSG(strlen(r) > 0, "%s %s: no result", label, id);
        CHECK_MSG(!has(r, "OUTSIDE-SECRET"), "%s %s: the outside file's content: %s", label, id, r);
        bool refusal = id[0] == 'r' || !strcmp(id, "g4") || !strcmp(id, "s3");
        if (refusal) {
            CHECK_MSG(has(r, "Error: PathPolicy: refused"), "%s %s: not refused: %s", label, id, r);
        } else {
            CHECK_MSG(!has(r, "secret"), "%s %s: a name reached through a link out: %s", label, id, r);
        }
        if (id[0] == 'g' && !refusal)
            CHECK_MSG(!has(r, "evil"), "%s %s: lists a link out: %s", label, id, r);
        if (id[0] == 's' && !refusal)
            CHECK_MSG(!has(r, "evil"), "%s %s: searched a link out: %s", label, id, r);
        if (id[0] == 'l')
            CHECK_MSG(!has(r, "[FILE] evil") && !has(r, "[DIR]  evil") && !has(r, "[FILE] sub/evil2"),
                      "%s %s: shows what a link out leads to: %s", label, id, r);
        free(r);
    }
    /* The inside files are still found: the tools work with this mix. */
    char *r = result_of(hist, "g1");
    CHECK_MSG(has(r, "inside.txt") && has(r, "sub/deep.md"), "%s g1: %s", label, r);
    free(r);
    r = result_of(hist, "s1");
    CHECK_MSG(has(r, "Found 2 match(es)") && has(r, "inside.txt:1:needle inside"), "%s s1: %s", label, r);
    free(r);
    r = result_of(hist, "l1");
    CHECK_MSG(has(r, "[LINK] evil (leads outside the workspace)") && has(r, "[FILE] inside.txt"),
              "%s l1: %s", label, r);
    free(r);
    r = result_of(hist, "l2");
    CHECK_MSG(has(r, "[LINK] sub/evil2 (leads outside the workspace)") && has(r, "[FILE] sub/deep.md"),
              "%s l2: %s", label, r);
    free(r);
    if (case_failures() != before) fprintf(stderr, "  (failing mix: %s)\n", label);
}

static void check_writes(const char *hist, const char *outside, const char *label) {
    static const char *ids[] = {"w1", "w2", "w3", "e1", "e2"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        char *r = result_of(hist, ids[i]);
        CHECK_MSG(strstr(r, "PathPolicy: refused"), "%s %s: %s", label, ids[i], r);
        free(r);
    }
    char *r = result_of(hist, "w4");
    CHECK_MSG(strstr(r, "Successfully wrote to fine.txt"), "%s w4: %s", label, r);
    free(r);
    char *secret = tu_printf("%s/secret.txt", outside);
    char *now = tu_read_file(secret);
    CHECK_MSG(now && strcmp(now, SECRET) == 0, "%s: the outside file changed: %s", label, now ? now : "(gone)");
    free(now);
    free(secret);
    char *made = tu_printf("%s/new.txt", outside);
    CHECK_MSG(!tu_file_exists(made), "%s: a file was created outside", label);
    free(made);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static char *slot_names(unsigned slots, bool follows) {
    return tu_printf("host{%s%s%s%s%s%s}%s", slots & SL_READ ? "read " : "", slots & SL_WRITE ? "write " : "",
                     slots & SL_LIST ? "list_dir " : "", slots & SL_WALK ? "walk " : "",
                     slots & SL_STAT ? "stat " : "", slots & SL_EXISTS ? "exists" : "",
                     follows ? " walk-follows-links" : "");
}

int main(void) {
    const char *parent = tu_workspace();
    char *outside = tu_printf("%s/outside", parent);
    char *ws = tu_printf("%s/ws", parent);
    CHECK(mkdir(outside, 0700) == 0);
    CHECK(mkdir(ws, 0700) == 0);
    char *p = tu_printf("%s/secret.txt", outside);
    write_file(p, SECRET);
    free(p);
    p = tu_printf("%s/sub", ws);
    CHECK(mkdir(p, 0700) == 0);
    free(p);
    p = tu_printf("%s/inside.txt", ws);
    write_file(p, "needle inside\n");
    free(p);
    p = tu_printf("%s/sub/deep.md", ws);
    write_file(p, "needle deep\n");
    free(p);
    p = tu_printf("%s/secret.txt", outside);
    char *link = tu_printf("%s/evil", ws);
    CHECK(symlink(p, link) == 0);
    free(link);
    free(p);
    link = tu_printf("%s/evildir", ws);
    CHECK(symlink(outside, link) == 0);
    free(link);
    link = tu_printf("%s/sub/evil2", ws);
    CHECK(symlink("../../outside/secret.txt", link) == 0);
    free(link);

    tu_section("every mix of host and local slots x every file tool x links out");
    int mixes = 0;
    /* NO_FS: no host file system installed at all (the local one), as the baseline. */
    for (unsigned slots = 0; slots <= NO_FS; slots++) {
        for (int follows = 0; follows <= ((slots & SL_WALK) && slots != NO_FS ? 1 : 0); follows++) {
            char *label = slots == NO_FS ? strdup("local file system") : slot_names(slots, follows);
            host h = {.walk_follows_links = follows};
            /* Reads, in read-only mode. */
            char *cfg = tu_config(ws, READS, "\"permissions\":{\"mode\":\"read-only\"}");
            agentao_agent *a = tu_agent(cfg, NULL);
            free(cfg);
            if (!a) {
                free(label);
                break;
            }
            agentao_file_system fs = vtable(&h, slots);
            if (slots != NO_FS) CHECK_STATUS(agentao_agent_set_file_system(a, &fs, NULL), AGENTAO_STATUS_OK);
            char *text = NULL;
            CHECK_STATUS(agentao_agent_chat(a, "look", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
            agentao_string_free(text);
            char *hist = tu_history(a);
            check_reads(hist, label);
            free(hist);
            agentao_agent_free(a);
            /* Writes, in full-access mode. */
            cfg = tu_config(ws, WRITES, "\"permissions\":{\"mode\":\"full-access\"}");
            a = tu_agent(cfg, NULL);
            free(cfg);
            if (!a) {
                free(label);
                break;
            }
            if (slots != NO_FS) CHECK_STATUS(agentao_agent_set_file_system(a, &fs, NULL), AGENTAO_STATUS_OK);
            CHECK_STATUS(agentao_agent_chat(a, "write", -1, NULL, &text, NULL), AGENTAO_STATUS_OK);
            agentao_string_free(text);
            hist = tu_history(a);
            check_writes(hist, outside, label);
            free(hist);
            agentao_agent_free(a);
            free(label);
            mixes++;
        }
    }
    printf("mixes checked: %d (each: 14 read calls, 6 write calls)\n", mixes);
    CHECK(mixes == 97);

    free(outside);
    free(ws);
    return tu_finish("test_fs_partial_slots");
}
