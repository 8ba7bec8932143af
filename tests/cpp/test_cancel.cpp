// Cancellation through cancel_token: before a turn, during a slow stream (measured), during a
// pending confirmation, from inside a callback, and by destroying the agent.
#include <gtest/gtest.h>

#include <mutex>
#include <optional>

#include "helpers.hpp"

using namespace th;

TEST(Cancel, BeforeTheTurn) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"first response"})"));
    agentao::cancel_token tok;
    tok.cancel("stopped-early");
    agentao::turn_options opts;
    opts.cancel = &tok;
    try {
        a.chat("hi", opts);
        FAIL() << "no exception";
    } catch (const agentao::error& e) {
        EXPECT_EQ(e.code(), agentao::status::cancelled);
        EXPECT_TRUE(contains(e.what(), "stopped-early")) << e.what();
    }
    auto last = a.last_turn();
    EXPECT_TRUE(contains(last, kv("text", "[Cancelled: stopped-early]"))) << last;
    // The script's response is still unused.
    EXPECT_EQ(a.chat("hi"), "first response");
}

TEST(Cancel, DuringASlowStream) {
    workspace ws;
    // 100 chunks, 20 ms apart: two seconds if nobody cancels.
    auto a = agentao::agent::create(
        config(ws, R"({"repeat_text":{"unit":"word ","count":100},"delay_ms":20})"));
    agentao::cancel_token tok;
    std::chrono::steady_clock::time_point cancelled_at;
    std::thread canceller([&] {
        std::this_thread::sleep_for(300ms);
        cancelled_at = std::chrono::steady_clock::now();
        tok.cancel("user-hit-stop");
    });
    agentao::turn_options opts;
    opts.cancel = &tok;
    auto r = a.try_chat("talk", opts);
    auto returned = std::chrono::steady_clock::now();
    canceller.join();
    EXPECT_EQ(r.code(), agentao::status::cancelled);
    auto latency = std::chrono::duration_cast<std::chrono::milliseconds>(returned - cancelled_at).count();
    std::printf("chat returned %lld ms after the cancel\n", static_cast<long long>(latency));
    EXPECT_LT(latency, 500);
    auto last = a.last_turn();
    EXPECT_TRUE(contains(last, kv("error", "user-hit-stop"))) << last;
    auto partial = json_str(last, "text");
    EXPECT_EQ(partial.rfind("word word ", 0), 0u) << partial;
    EXPECT_LT(partial.size(), 500u);
}

TEST(Cancel, DuringAPendingConfirmation) {
    workspace ws;
    std::mutex mu;
    std::optional<agentao::reply> kept;
    std::atomic<int> asked{0};
    agentao::transport t;
    t.confirm_tool = [&](const agentao::tool_confirmation&, agentao::reply&& r) {
        std::lock_guard<std::mutex> g(mu);
        kept.emplace(std::move(r));
        asked = 1;
    };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    agentao::cancel_token tok;
    std::thread canceller([&] {
        wait_until([&] { return asked.load() == 1; });
        tok.cancel("no-answer-coming");
    });
    agentao::turn_options opts;
    opts.cancel = &tok;
    EXPECT_EQ(a.try_chat("write", opts).code(), agentao::status::cancelled);
    canceller.join();
    EXPECT_TRUE(contains(a.history(), "[Cancelled: no-answer-coming]"));
    // The late answer is harmless and runs nothing.
    {
        std::lock_guard<std::mutex> g(mu);
        ASSERT_TRUE(kept.has_value());
        EXPECT_TRUE(kept->try_confirm(agentao::confirmation::allow).ok());
    }
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(exists(ws.file("out.txt")));
}

TEST(Cancel, InsideEmit) {
    workspace ws;
    agentao::cancel_token tok;
    agentao::transport t;
    t.emit = [&](std::string_view ev) {
        if (contains(std::string(ev), "\"type\":\"llm_text\"")) tok.cancel("cancelled-in-emit");
    };
    auto a = agentao::agent::create(
        config(ws, R"({"text":"abcdefghijklmnopqrstuvwxyz","chunk_size":1,"delay_ms":5})"), std::move(t));
    agentao::turn_options opts;
    opts.cancel = &tok;
    EXPECT_EQ(a.try_chat("abc", opts).code(), agentao::status::cancelled);
    auto last = a.last_turn();
    EXPECT_TRUE(contains(last, kv("error", "cancelled-in-emit"))) << last;
    EXPECT_LT(json_str(last, "text").size(), 26u);
}

TEST(Cancel, DestroyingTheAgentCancelsItsTurn) {
    workspace ws;
    agentao::cancel_token tok;
    std::mutex mu;
    std::optional<agentao::turn_result> result;
    {
        auto a = agentao::agent::create(config(ws, R"({"text":"slow","chunk_size":1,"delay_ms":200})"));
        agentao::turn_options opts;
        opts.cancel = &tok;
        a.run("x", [&](agentao::turn_result r) {
            std::lock_guard<std::mutex> g(mu);
            result = std::move(r);
        }, opts);
        std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(wait_until([&] {
        std::lock_guard<std::mutex> g(mu);
        return result.has_value();
    }, 5s));
    std::lock_guard<std::mutex> g(mu);
    EXPECT_EQ(result->code, agentao::status::cancelled);
    EXPECT_TRUE(contains(result->outcome_json, kv("error", "session-closed"))) << result->outcome_json;
    EXPECT_FALSE(tok.is_cancelled()) << "cancelling the turn cancelled the host's token";
}

TEST(Cancel, OnCancelRunsOnceAndAWatchRemovesIt) {
    agentao::cancel_token tok;
    std::atomic<int> hits{0};
    std::string reason;
    std::thread::id on;
    auto watch = tok.on_cancel([&](std::string_view r) {
        reason = std::string(r);
        on = std::this_thread::get_id();
        hits++;
    });
    std::atomic<int> removed_hits{0};
    auto removed = tok.on_cancel([&](std::string_view) { removed_hits++; });
    EXPECT_TRUE(removed.remove());
    std::thread t([&] { tok.cancel("from a thread"); });
    auto canceller = t.get_id();
    t.join();
    EXPECT_EQ(hits.load(), 1);
    EXPECT_EQ(reason, "from a thread");
    EXPECT_EQ(on, canceller);
    EXPECT_EQ(removed_hits.load(), 0);
    EXPECT_FALSE(watch.remove());  // it ran
    // Already cancelled: at once, here; a throwing callback is contained.
    auto late = tok.on_cancel([&](std::string_view) {
        hits++;
        throw std::runtime_error("a host bug");
    });
    EXPECT_EQ(hits.load(), 2);
    EXPECT_EQ(tok.try_on_cancel(nullptr).code(), agentao::status::null_argument);
}

TEST(Cancel, AWatchOutlivesItsToken) {
    std::atomic<int> hits{0};
    agentao::cancel_watch watch;
    {
        agentao::cancel_token tok;
        watch = tok.on_cancel([&](std::string_view) { hits++; });
    }
    EXPECT_TRUE(watch.remove());
    EXPECT_EQ(hits.load(), 0);
}
