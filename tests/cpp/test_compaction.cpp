// Images, the context figures, compaction on demand and the compaction controller through
// the C++ binding: an image reaches the history with chat and run, a bad one is refused; the
// controller's facts, its summary answered from another thread, a cancel, a throwing
// controller (which cancels), and its box released once.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "helpers.hpp"

using namespace th;

namespace compaction_test {

const std::vector<uint8_t> PNG = {0x89, 'P', 'N', 'G', 1, 2, 3};

// Twelve messages of about 400 characters each: a short summary makes them smaller.
std::string long_history() {
    std::string filler(400, 'x');
    std::string h = "[";
    for (int i = 0; i < 6; i++) {
        if (i) h += ",";
        h += R"({"role":"user","content":"request )" + std::to_string(i) + " " + filler + R"("},)";
        h += R"({"role":"assistant","content":"answer )" + std::to_string(i) + " " + filler + R"("})";
    }
    return h + "]";
}

}  // namespace compaction_test

using namespace compaction_test;

TEST(Images, ChatAndRunSendImagesAndABadOneIsRefused) {
    workspace ws;
    auto agent = agentao::agent::create(config(ws, R"({"text":"seen"},{"text":"seen again"})"));
    std::vector<agentao::image> images{{"image/png", PNG}};
    agentao::turn_options opts;
    opts.images = &images;
    EXPECT_EQ(agent.chat("look", opts), "seen");
    EXPECT_TRUE(contains(agent.history(), R"("url":"data:image/png;base64,iVBORwECAw==")"));

    std::vector<agentao::image> bad{{"image/svg+xml", PNG}};
    agentao::turn_options bad_opts;
    bad_opts.images = &bad;
    auto r = agent.try_chat("look", bad_opts);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), agentao::status::invalid_argument);
    EXPECT_TRUE(contains(r.error().what(), "image/svg+xml"));
    EXPECT_FALSE(agent.try_stream_open("look", opts));

    std::atomic<bool> done{false};
    agentao::turn_result got;
    agent.run("again", [&](agentao::turn_result t) { got = std::move(t); done = true; }, opts);
    ASSERT_TRUE(wait_until([&] { return done.load(); }));
    EXPECT_TRUE(got.ok()) << got.message;
    EXPECT_TRUE(contains(got.outcome_json, "seen again"));
}

TEST(Compaction, ContextUsageAndCompactOnDemand) {
    workspace ws;
    auto agent = agentao::agent::create(config(ws, R"({"text":"S1 summary"})"));
    EXPECT_TRUE(contains(agent.context_usage(), R"("window":200000)"));
    // Too short a history: skipped.
    EXPECT_TRUE(contains(agent.compact(), kv("status", "skipped")));
    agent.set_history(long_history());
    std::string r = agent.compact("host_asked");
    EXPECT_TRUE(contains(r, kv("status", "success"))) << r;
    EXPECT_TRUE(contains(agent.history(), "S1 summary"));
}

TEST(Compaction, ControllerAnswersFromAnotherThreadCancelsAndThrows) {
    workspace ws;
    auto agent = agentao::agent::create(config(ws, R"({"text":"never"})"));
    agent.set_history(long_history());
    std::mutex mu;
    std::optional<agentao::compaction_request> seen;
    std::string seen_reason, seen_messages;
    std::atomic<int> mode{0};
    std::thread answerer;
    agent.set_compaction_controller(
        [&](const agentao::compaction_request& req, agentao::compaction_reply&& reply) {
            {
                std::lock_guard<std::mutex> g(mu);
                seen = req;
                seen_reason = std::string(req.reason);
                seen_messages = std::string(req.messages_json);
            }
            switch (mode.load()) {
            case 0:
                reply.cancel("not now");
                break;
            case 1:
                throw std::runtime_error("boom");
            default:
                answerer = std::thread([r = std::move(reply)]() mutable {
                    std::this_thread::sleep_for(std::chrono::milliseconds(30));
                    r.summary("CPP SUMMARY");
                });
            }
        });

    std::string r = agent.compact("host");
    EXPECT_TRUE(contains(r, kv("status", "cancelled"))) << r;
    EXPECT_TRUE(contains(r, "cancelled by the compaction controller: not now")) << r;
    {
        std::lock_guard<std::mutex> g(mu);
        ASSERT_TRUE(seen.has_value());
        EXPECT_EQ(seen->trigger, agentao::compaction_trigger::manual);
        EXPECT_EQ(seen->kind, agentao::compaction_kind::full);
        EXPECT_EQ(seen->window, 200000u);
        EXPECT_EQ(seen->messages_to_summarize + seen->messages_kept, 12u);
        EXPECT_FALSE(seen->child_task_id.has_value());
        EXPECT_EQ(seen_reason, "host");
        EXPECT_TRUE(contains(seen_messages, "request 0 xxx"));
    }

    mode = 1;
    r = agent.compact();
    EXPECT_TRUE(contains(r, "the compaction controller failed: the compaction controller threw: boom"))
        << r;

    mode = 2;
    r = agent.compact();
    if (answerer.joinable()) answerer.join();
    EXPECT_TRUE(contains(r, kv("status", "success"))) << r;
    EXPECT_TRUE(contains(agent.history(), "CPP SUMMARY"));

    EXPECT_TRUE(agent.try_set_compaction_controller(std::nullopt));
    EXPECT_FALSE(agent.try_set_compaction_controller(agentao::compaction_controller{}));
}

// The reply's ownership comes from the shared pending_answer base: destroyed unanswered it
// fails the request with its own message; moved from, or answered, a second answer is
// status::null_argument.
TEST(Compaction, ReplyDroppedMovedAndAnsweredTwice) {
    workspace ws;
    auto agent = agentao::agent::create(config(ws, R"({"text":"never"})"));
    agent.set_history(long_history());
    std::atomic<int> mode{0};
    std::mutex mu;
    std::vector<std::string> notes;
    agent.set_compaction_controller([&](const agentao::compaction_request&, agentao::compaction_reply&& reply) {
        if (mode.load() == 0) return;  // dropped unanswered
        agentao::compaction_reply kept(std::move(reply));
        auto moved_from = reply.try_allow();
        auto first = kept.try_cancel("kept");
        auto second = kept.try_allow();
        std::lock_guard<std::mutex> g(mu);
        notes.push_back(std::string(agentao::status_name(moved_from.code())) + " " +
                        (moved_from ? "" : moved_from.error().what()));
        notes.push_back(first ? "first ok" : first.error().what());
        notes.push_back(std::string(agentao::status_name(second.code())) + " " + (reply.pending() ? "pending" : "taken"));
    });

    std::string r = agent.compact();
    EXPECT_TRUE(contains(r, kv("status", "cancelled"))) << r;
    EXPECT_TRUE(contains(r, "the host dropped the reply without answering")) << r;

    mode = 1;
    r = agent.compact();
    EXPECT_TRUE(contains(r, "cancelled by the compaction controller: kept")) << r;
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(notes.size(), 3u);
    EXPECT_EQ(notes[0], "NULL_ARGUMENT the reply was already answered or moved");
    EXPECT_EQ(notes[1], "first ok");
    EXPECT_EQ(notes[2], "NULL_ARGUMENT taken");
}
