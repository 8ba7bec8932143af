// The transport as std::functions: events, confirmations and questions answered inside the
// callback or later from another thread, max-iterations actions.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <vector>

#include "helpers.hpp"

using namespace th;

namespace {

// Keeps the replies a test answers later, from its own thread.
struct mailbox {
    std::mutex mu;
    std::optional<agentao::reply> reply;
    std::atomic<int> calls{0};

    void put(agentao::reply&& r) {
        std::lock_guard<std::mutex> g(mu);
        reply.emplace(std::move(r));
        calls++;
    }
    std::optional<agentao::reply> take(std::chrono::milliseconds timeout = 10s) {
        std::optional<agentao::reply> out;
        wait_until(
            [&] {
                std::lock_guard<std::mutex> g(mu);
                if (!reply) return false;
                out.emplace(std::move(*reply));
                reply.reset();
                return true;
            },
            timeout);
        return out;
    }
};

}  // namespace

TEST(Transport, EventsInOrderWithoutOverlap) {
    workspace ws;
    std::mutex mu;
    std::vector<std::string> types;
    std::atomic<int> in_emit{0}, overlaps{0};
    std::string confirmed_tool;
    agentao::transport t;
    t.emit = [&](std::string_view ev) {
        if (in_emit.exchange(1)) overlaps++;
        std::lock_guard<std::mutex> g(mu);
        types.push_back(json_str(std::string(ev), "type"));
        in_emit = 0;
    };
    t.confirm_tool = [&](const agentao::tool_confirmation& call, agentao::reply&& r) {
        confirmed_tool = std::string(call.tool_name);
        EXPECT_EQ(call.call_id, "w1");
        EXPECT_TRUE(contains(std::string(call.args_json), "out.txt"));
        r.confirm(agentao::confirmation::allow);
    };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    EXPECT_EQ(a.chat("write"), "written");
    EXPECT_EQ(confirmed_tool, "write_file");
    EXPECT_EQ(read_file(ws.file("out.txt")), "deferred");
    std::lock_guard<std::mutex> g(mu);
    ASSERT_FALSE(types.empty());
    EXPECT_EQ(types.front(), "turn_begin");
    EXPECT_EQ(types.back(), "turn_end");
    auto pos = [&](const std::string& ty) {
        return std::find(types.begin(), types.end(), ty) - types.begin();
    };
    EXPECT_LT(pos("tool_confirmation"), pos("tool_start"));
    EXPECT_LT(pos("tool_start"), pos("tool_complete"));
    EXPECT_EQ(overlaps.load(), 0);
}

TEST(Transport, DenyInsideTheCallback) {
    workspace ws;
    agentao::transport t;
    t.confirm_tool = [](const agentao::tool_confirmation&, agentao::reply&& r) {
        r.confirm(agentao::confirmation::deny);
    };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    EXPECT_EQ(a.chat("write"), "written");
    EXPECT_FALSE(exists(ws.file("out.txt")));
    EXPECT_TRUE(contains(a.history(),
                         "Tool execution declined: 'write_file' needed approval and was not approved."));
}

TEST(Transport, ConfirmationAnsweredLaterFromAnotherThread) {
    workspace ws;
    mailbox box;
    agentao::transport t;
    t.confirm_tool = [&](const agentao::tool_confirmation&, agentao::reply&& r) { box.put(std::move(r)); };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    std::atomic<bool> answered_ok{false};
    std::thread answerer([&] {
        auto r = box.take();
        ASSERT_TRUE(r.has_value());
        std::this_thread::sleep_for(150ms);
        answered_ok = r->try_confirm(agentao::confirmation::allow).ok();
        EXPECT_FALSE(r->pending());
    });
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(a.chat("write"), "written");
    auto took = ms_since(t0);
    answerer.join();
    EXPECT_TRUE(answered_ok.load());
    EXPECT_GE(took, 140) << "the turn did not wait for the deferred answer";
    EXPECT_EQ(read_file(ws.file("out.txt")), "deferred");
    EXPECT_EQ(box.calls.load(), 1);
}

TEST(Transport, FailedLaterIsHostError) {
    workspace ws;
    mailbox box;
    agentao::transport t;
    t.confirm_tool = [&](const agentao::tool_confirmation&, agentao::reply&& r) { box.put(std::move(r)); };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    std::thread answerer([&] {
        auto r = box.take();
        ASSERT_TRUE(r.has_value());
        r->fail("the operator said no");
    });
    try {
        a.chat("write");
        ADD_FAILURE() << "no exception";
    } catch (const agentao::error& e) {
        EXPECT_EQ(e.code(), agentao::status::host_error);
        EXPECT_TRUE(contains(e.what(), "the operator said no")) << e.what();
    }
    answerer.join();
    EXPECT_TRUE(contains(a.last_turn(), kv("status", "error")));
    EXPECT_FALSE(exists(ws.file("out.txt")));
}

TEST(Transport, DroppedReplyFailsTheRequest) {
    workspace ws;
    agentao::transport t;
    t.confirm_tool = [](const agentao::tool_confirmation&, agentao::reply&& r) {
        agentao::reply forgotten = std::move(r);  // destroyed unanswered
    };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    auto r = a.try_chat("write");
    EXPECT_EQ(r.code(), agentao::status::host_error);
    EXPECT_TRUE(contains(r.error().what(), "dropped the reply")) << r.error().what();
    EXPECT_FALSE(exists(ws.file("out.txt")));
}

TEST(Transport, ReplyAnswersOnce) {
    workspace ws;
    std::atomic<int> second{-1};
    agentao::transport t;
    t.confirm_tool = [&](const agentao::tool_confirmation&, agentao::reply&& r) {
        r.confirm(agentao::confirmation::allow);
        second = static_cast<int>(r.try_confirm(agentao::confirmation::deny).code());
    };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    EXPECT_EQ(a.chat("write"), "written");
    EXPECT_EQ(second.load(), static_cast<int>(agentao::status::null_argument));
    EXPECT_TRUE(exists(ws.file("out.txt")));
}

TEST(Transport, AskUserAnswered) {
    workspace ws;
    std::string question, hints;
    agentao::transport t;
    t.ask_user = [&](std::string_view q, std::string_view h, agentao::reply&& r) {
        question = std::string(q);
        hints = std::string(h);
        r.text("blue");
    };
    auto a = agentao::agent::create(
        config(ws,
               R"({"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Favourite colour?"}}]},)"
               R"({"text":"noted"})"),
        std::move(t));
    EXPECT_EQ(a.chat("ask me"), "noted");
    EXPECT_EQ(question, "Favourite colour?");
    EXPECT_TRUE(contains(hints, "\"multiple\"")) << hints;
    EXPECT_TRUE(contains(a.history(), "blue"));
}

TEST(Transport, EmptySlotsBehaveLikeTheNullTransport) {
    workspace ws;
    agentao::transport t;  // every function empty
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    EXPECT_EQ(a.chat("write"), "written");
    EXPECT_TRUE(exists(ws.file("out.txt")));  // approved
}

namespace {

struct max_iter_run {
    agentao::status code = agentao::status::ok;
    std::string text, last, history, pending;
    int calls = 0;
    uint32_t count = 0;
};

max_iter_run run_with(const std::function<void(agentao::reply&&)>& answer, int budget) {
    workspace ws;
    max_iter_run out;
    agentao::transport t;
    t.on_max_iterations = [&](uint32_t count, std::string_view pending, agentao::reply&& r) {
        out.calls++;
        out.count = count;
        out.pending = std::string(pending);
        answer(std::move(r));
    };
    auto a = agentao::agent::create(config(ws, LOOP), std::move(t));
    agentao::turn_options opts;
    opts.max_iterations = budget;
    auto r = a.try_chat("work", opts);
    out.code = r.code();
    if (r) out.text = r.value();
    out.last = a.last_turn();
    out.history = a.history();
    return out;
}

}  // namespace

TEST(MaxIterations, Stop) {
    auto r = run_with([](agentao::reply&& r) { r.json(R"({"action":"stop"})"); }, 2);
    EXPECT_EQ(r.code, agentao::status::ok);
    EXPECT_EQ(r.calls, 1);
    EXPECT_EQ(r.count, 2u);
    EXPECT_TRUE(contains(r.pending, R"([{"name":"list_directory","args":)")) << r.pending;
    EXPECT_EQ(r.text, "step 2");
    EXPECT_TRUE(contains(r.last, kv("incomplete_reason", "max_iterations"))) << r.last;
}

TEST(MaxIterations, Continue) {
    auto r = run_with([](agentao::reply&& r) { r.json(R"({"action":"continue"})"); }, 3);
    EXPECT_EQ(r.code, agentao::status::ok);
    EXPECT_EQ(r.calls, 1);
    EXPECT_EQ(r.text, "final answer");
}

TEST(MaxIterations, NewInstruction) {
    auto r = run_with(
        [](agentao::reply&& r) { r.json(R"({"action":"new_instruction","message":"wrap it up"})"); }, 2);
    EXPECT_EQ(r.code, agentao::status::ok);
    EXPECT_TRUE(contains(r.history, "wrap it up")) << r.history;
}

TEST(MaxIterations, AnsweredLaterFromAnotherThread) {
    std::thread worker;
    auto r = run_with(
        [&](agentao::reply&& r) {
            worker = std::thread([r = std::move(r)]() mutable {
                std::this_thread::sleep_for(50ms);
                r.json(R"({"action":"continue"})");
            });
        },
        3);
    worker.join();
    EXPECT_EQ(r.code, agentao::status::ok);
    EXPECT_EQ(r.text, "final answer");
}

TEST(MaxIterations, BadJsonFailsTheTurn) {
    std::atomic<int> st{-1};
    auto r = run_with(
        [&](agentao::reply&& r) { st = static_cast<int>(r.try_json("not json").code()); }, 2);
    EXPECT_EQ(st.load(), static_cast<int>(agentao::status::invalid_json));
    EXPECT_EQ(r.code, agentao::status::host_error);
}
