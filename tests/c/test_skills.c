/* Skills through the C API (docs/skills.md): the `skills` config section, agentao_agent_skills
 * (what was found and what was skipped, why), activate_skill in a turn on the scripted
 * provider (a file skill, an inline skill, an unknown name), and bad input: NULL arguments and
 * a bad section. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_util.h"

static void write_file(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK_MSG(f != NULL, "cannot write %s", path);
    if (!f) return;
    fwrite(text, 1, len, f);
    fclose(f);
}

/* <ws>/skills/<name>/SKILL.md holding `text`. */
static void write_skill(const char *ws, const char *name, const char *text, size_t len) {
    char *dir = tu_printf("%s/skills", ws);
    mkdir(dir, 0755);
    free(dir);
    dir = tu_printf("%s/skills/%s", ws, name);
    mkdir(dir, 0755);
    char *file = tu_printf("%s/SKILL.md", dir);
    write_file(file, text, len);
    free(file);
    free(dir);
}

#define SKILL(text) text, sizeof(text) - 1

/* The section used below: no user directory (never the real home), one inline skill. */
#define SECTION                                                                          \
    "\"skills\":{\"user_directory\":null,\"inline\":[{\"name\":\"inline-one\","          \
    "\"description\":\"From the host.\",\"instructions\":\"# Inline\\nDo it inline.\"}]}"

static char *skills_report(agentao_agent *a) {
    char *json = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_skills(a, &json, &err), AGENTAO_STATUS_OK);
    CHECK(err == NULL);
    return json;
}

static void test_report(void) {
    tu_section("report");
    const char *ws = tu_workspace();
    write_skill(ws, "pdf", SKILL("---\nname: pdf\ndescription: Fill PDF forms.\n---\n# PDF\nUse fill.py.\n"));
    write_skill(ws, "latin1", SKILL("---\nname: latin1\ndescription: caf\xe9\n---\n"));
    write_skill(ws, "unclosed", SKILL("---\nname: unclosed\n"));
    char *cfg = tu_config(ws, "{\"text\":\"ok\"}", SECTION);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    char *json = skills_report(a);
    CHECK_CONTAINS(json, "\"enabled\":true");
    CHECK_CONTAINS(json, TU_KV("name", "inline-one"));
    CHECK_CONTAINS(json, TU_KV("origin", "inline"));
    CHECK_CONTAINS(json, TU_KV("name", "pdf"));
    CHECK_CONTAINS(json, TU_KV("origin", "repository"));
    CHECK_CONTAINS(json, TU_KV("kind", "not_utf8"));
    CHECK_CONTAINS(json, TU_KV("kind", "front_matter"));
    CHECK_CONTAINS(json, "the front matter is not closed");
    CHECK_NOT_CONTAINS(json, TU_KV("name", "latin1"));
    agentao_string_free(json);
    agentao_agent_free(a);
}

static void test_activation_in_a_turn(void) {
    tu_section("activation in a turn");
    const char *ws = tu_workspace();
    write_skill(ws, "pdf", SKILL("---\nname: pdf\ndescription: Fill PDF forms.\n---\n# PDF\nUse fill.py.\n"));
    char *cfg = tu_config(
        ws,
        "{\"tool_calls\":[{\"id\":\"a1\",\"name\":\"activate_skill\",\"arguments\":"
        "{\"skill_name\":\"pdf\",\"task_description\":\"fill it\"}}]},"
        "{\"tool_calls\":[{\"id\":\"a2\",\"name\":\"activate_skill\",\"arguments\":"
        "{\"skill_name\":\"inline-one\",\"task_description\":\"inline task\"}}]},"
        "{\"tool_calls\":[{\"id\":\"a3\",\"name\":\"activate_skill\",\"arguments\":"
        "{\"skill_name\":\"nope\",\"task_description\":\"x\"}}]},"
        "{\"text\":\"done\"}",
        SECTION);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    char *text = tu_chat(a, "Use the skills.");
    CHECK_STR_EQ(text, "done");
    agentao_string_free(text);
    char *history = tu_history(a);
    CHECK_CONTAINS(history, "\\nSkill Activated: pdf\\nTitle: PDF\\nDescription: Fill PDF forms....\\nTask: fill it\\n");
    CHECK_CONTAINS(history, "=== Skill Instructions ===\\n# PDF\\nUse fill.py.");
    CHECK_CONTAINS(history, "\\nSkill Activated: inline-one\\nTitle: Inline\\n");
    CHECK_CONTAINS(history, "Documentation: N/A");
    CHECK_CONTAINS(history, "Do it inline.");
    CHECK_CONTAINS(history, "Error: Unknown skill 'nope'. Available skills: inline-one, pdf");
    free(history);
    agentao_agent_free(a);
}

static void test_without_a_section(void) {
    tu_section("without a section");
    const char *ws = tu_workspace();
    write_skill(ws, "pdf", SKILL("---\nname: pdf\ndescription: Fill PDF forms.\n---\nbody\n"));
    char *cfg = tu_config(ws, "{\"tool_calls\":[{\"id\":\"a1\",\"name\":\"activate_skill\","
                              "\"arguments\":{\"skill_name\":\"pdf\",\"task_description\":\"x\"}}]},"
                              "{\"text\":\"done\"}",
                          NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (!a) return;
    char *json = skills_report(a);
    CHECK_STR_EQ(json, "{\"enabled\":false,\"skills\":[],\"skipped\":[]}");
    agentao_string_free(json);
    /* No tool of that name: the model's call is an unknown tool. */
    char *text = tu_chat(a, "Go.");
    agentao_string_free(text);
    char *result = tu_last_tool_result(a);
    CHECK_CONTAINS(result, "Tool 'activate_skill' not found");
    free(result);
    agentao_agent_free(a);
}

static void test_bad_input(void) {
    tu_section("bad input");
    char *json = (char *)"untouched";
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_skills(NULL, &json, &err), AGENTAO_STATUS_NULL_ARGUMENT);
    CHECK_CONTAINS(agentao_error_message(err), "agent");
    agentao_error_free(err);
    err = NULL;

    const char *ws = tu_workspace();
    char *cfg = tu_config(ws, "{\"text\":\"ok\"}", NULL);
    agentao_agent *a = tu_agent(cfg, NULL);
    free(cfg);
    if (a) {
        CHECK_STATUS(agentao_agent_skills(a, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT);
        CHECK_CONTAINS(agentao_error_message(err), "json_out");
        agentao_error_free(err);
        err = NULL;
        agentao_agent_free(a);
    }

    const char *bad[][2] = {
        {"\"skills\":[]", "config field `skills`: must be an object"},
        {"\"skills\":{\"inline\":[{\"name\":\"\",\"instructions\":\"x\"}]}",
         "config field `skills.inline[0]`: `name` must not be empty"},
        {"\"skills\":{\"enabled\":\"yes\"}", "skills.enabled"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cfg = tu_config(ws, "{\"text\":\"ok\"}", bad[i][0]);
        agentao_agent *none = NULL;
        CHECK_STATUS(agentao_agent_new(cfg, NULL, &none, &err), AGENTAO_STATUS_INVALID_CONFIG);
        CHECK(none == NULL);
        CHECK_CONTAINS(agentao_error_message(err), bad[i][1]);
        agentao_error_free(err);
        err = NULL;
        free(cfg);
    }
}

int main(void) {
    test_report();
    test_activation_in_a_turn();
    test_without_a_section();
    test_bad_input();
    return tu_finish("test_skills");
}
