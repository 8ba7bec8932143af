// Permissions and usage through the C++ API: injected rules and sources, run-scope rules,
// mode switches, the snapshot, no_engine, bad rules.
#include <gtest/gtest.h>

#include "helpers.hpp"

using namespace th;

static const std::string WRITE_SECRET =
    R"({"tool_calls":[{"id":"w1","name":"write_file","arguments":{"file_path":"secret.txt","content":"x"}}]},)"
    R"({"text":"done","usage":{"prompt_tokens":7,"completion_tokens":3}})";

TEST(Permissions, RulesSourcesModesUsage) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, WRITE_SECRET, R"("permissions":{"mode":"workspace-write"})"));
    a.add_permission_rules(R"([{"tool":"write_file","args":{"file_path":"secret"},"action":"deny"}])", "host");
    a.add_permission_source("injected:tenant-policy");
    auto snap = a.active_permissions();
    EXPECT_TRUE(contains(snap, "\"mode\":\"workspace-write\"")) << snap;
    EXPECT_TRUE(contains(snap, "\"injected:host\""));
    EXPECT_TRUE(contains(snap, "\"injected:tenant-policy\""));
    EXPECT_EQ(a.chat("write the secret"), "done");
    EXPECT_FALSE(exists(ws.file("secret.txt")));
    EXPECT_TRUE(contains(a.history(),
                         "Tool execution denied: 'write_file' is not permitted by the current permission rules."));
    auto usage = a.usage();
    EXPECT_TRUE(contains(usage, "\"prompt_tokens\":7")) << usage;
    EXPECT_TRUE(contains(usage, "\"completion_tokens\":3"));

    try {
        a.add_permission_rules(R"([{"tool":"x","action":"maybe"}])", "bad");
        FAIL() << "no exception";
    } catch (const agentao::error& e) {
        EXPECT_EQ(e.code(), agentao::status::invalid_argument);
        EXPECT_TRUE(contains(e.what(), "rules[0]")) << e.what();
    }
    EXPECT_EQ(a.try_add_permission_rules("[{", "bad").code(), agentao::status::invalid_json);
    EXPECT_FALSE(contains(a.active_permissions(), "injected:bad"));

    a.add_run_rules(std::nullopt, R"([{"tool":"read_file","action":"deny"}])");
    EXPECT_TRUE(contains(a.active_permissions(), "\"injected:run-spec\""));
    a.add_run_rules(R"([{"tool":"glob","action":"allow"}])", std::nullopt, "mine");
    EXPECT_TRUE(contains(a.active_permissions(), "\"injected:mine\""));
    EXPECT_EQ(a.set_permission_mode("read-only"), "workspace-write");
    EXPECT_EQ(a.set_permission_mode("full-access"), "read-only");
    EXPECT_TRUE(contains(a.active_permissions(), "\"mode\":\"full-access\""));
    EXPECT_EQ(a.try_set_permission_mode("chaos").code(), agentao::status::invalid_argument);
}

TEST(Permissions, ModeChangeEventsReachTheTransport) {
    workspace ws;
    std::atomic<int> mode_events{0};
    agentao::transport t;
    t.emit = [&](std::string_view ev) {
        if (contains(std::string(ev), "\"permission_mode_changed\"")) mode_events++;
    };
    auto a = agentao::agent::create(config(ws, R"({"text":"x"})", R"("permissions":{})"), std::move(t));
    a.set_permission_mode("plan");
    EXPECT_EQ(mode_events.load(), 1);
}

TEST(Permissions, NoEngine) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"x"})"));
    EXPECT_EQ(a.try_add_permission_rules("[]", "host").code(), agentao::status::no_engine);
    EXPECT_EQ(a.try_add_run_rules("[]", "[]", "x").code(), agentao::status::no_engine);
    EXPECT_EQ(a.try_add_permission_source("injected:x").code(), agentao::status::no_engine);
    EXPECT_EQ(a.active_permissions(),
              R"({"mode":"workspace-write","rules":[],"loaded_sources":["default:no-engine"]})");
}
