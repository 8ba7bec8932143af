// Lifecycle hooks through the C++ binding: the request's facts and a deny, context answered
// from another thread after the call, a throwing hook (which denies the call), and the box
// released once the hooks are removed.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include "helpers.hpp"

using namespace th;

namespace hooks_test {

const std::string READ_A =
    R"({"tool_calls":[{"id":"c1","name":"read_file","arguments":{"file_path":"a.txt"}}]},{"text":"done"})";

}  // namespace hooks_test

using namespace hooks_test;

TEST(Hooks, DenyContextFromAnotherThreadAndAThrowingHook) {
    workspace ws;
    std::ofstream(ws.file("a.txt")) << "alpha\n";
    auto agent = agentao::agent::create(config(ws, READ_A + "," + READ_A + "," + READ_A));
    std::mutex mu;
    std::string tool, call, input;
    std::atomic<int> mode{0};
    std::thread answerer;
    agent.set_hooks([&](const agentao::hook_request& req, agentao::hook_reply&& reply) {
        bool pre = req.event == agentao::hook_event::pre_tool_use;
        if (pre) {
            std::lock_guard<std::mutex> g(mu);
            tool = std::string(req.tool_name.value_or(""));
            call = std::string(req.call_id.value_or(""));
            input = std::string(req.input_json);
        }
        switch (mode.load()) {
        case 0:
            reply.output(pre ? R"({"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"not from C++"}})"
                             : "");
            break;
        case 1:
            if (req.event == agentao::hook_event::post_tool_use) {
                answerer = std::thread([r = std::move(reply)]() mutable {
                    std::this_thread::sleep_for(std::chrono::milliseconds(30));
                    r.output(R"({"hookSpecificOutput":{"additionalContext":"checked by C++"}})");
                });
            } else {
                reply.output("");
            }
            break;
        default:
            if (pre) throw std::runtime_error("boom");
            reply.output("");
        }
    });

    agent.chat("go");
    std::string h = agent.history();
    EXPECT_TRUE(contains(h, "Hook reason: not from C++")) << h;
    {
        std::lock_guard<std::mutex> g(mu);
        EXPECT_EQ(tool, "read_file");
        EXPECT_EQ(call, "c1");
        EXPECT_TRUE(contains(input, R"("tool_input":{"file_path":"a.txt"})")) << input;
    }

    mode = 1;
    agent.chat("go");
    if (answerer.joinable()) answerer.join();
    h = agent.history();
    EXPECT_TRUE(contains(h, R"(<system-reminder>\nchecked by C++\n</system-reminder>)")) << h;

    mode = 2;
    agent.chat("go");
    EXPECT_TRUE(contains(agent.history(), "the hooks threw: boom"));

    EXPECT_TRUE(agent.try_set_hooks(std::nullopt));
    EXPECT_FALSE(agent.try_set_hooks(agentao::hooks_fn{}));
}
