// Exception safety: an exception thrown by any C++ callback is caught at the C boundary (the
// process neither terminates nor unwinds through Rust) and becomes the documented failure.
#include <gtest/gtest.h>

#include <mutex>
#include <optional>

#include "helpers.hpp"

using namespace th;

TEST(Exceptions, ConfirmToolThrowsIsHostError) {
    workspace ws;
    agentao::transport t;
    t.confirm_tool = [](const agentao::tool_confirmation&, agentao::reply&&) {
        throw std::runtime_error("policy service unreachable");
    };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    auto r = a.try_chat("write");
    EXPECT_EQ(r.code(), agentao::status::host_error);
    EXPECT_TRUE(contains(r.error().what(), "confirm_tool callback threw: policy service unreachable"))
        << r.error().what();
    EXPECT_FALSE(exists(ws.file("out.txt")));
    // The agent is still usable.
    EXPECT_EQ(a.chat("again"), "written");
}

TEST(Exceptions, ThrowAfterAnsweringKeepsTheAnswer) {
    workspace ws;
    agentao::transport t;
    t.confirm_tool = [](const agentao::tool_confirmation&, agentao::reply&& r) {
        r.confirm(agentao::confirmation::allow);
        throw 42;  // not even a std::exception
    };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    EXPECT_EQ(a.chat("write"), "written");
    EXPECT_TRUE(exists(ws.file("out.txt")));
}

TEST(Exceptions, AskUserThrowsIsAToolErrorAndTheTurnGoesOn) {
    workspace ws;
    agentao::transport t;
    t.ask_user = [](std::string_view, std::string_view, agentao::reply&&) {
        throw std::logic_error("no terminal attached");
    };
    auto a = agentao::agent::create(
        config(ws,
               R"({"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Colour?"}}]},)"
               R"({"text":"carried on"})"),
        std::move(t));
    EXPECT_EQ(a.chat("ask"), "carried on");
    auto hist = a.history();
    EXPECT_TRUE(contains(hist, "ask_user callback threw: no terminal attached")) << hist;
}

TEST(Exceptions, MaxIterationsThrowsIsHostError) {
    workspace ws;
    agentao::transport t;
    t.on_max_iterations = [](uint32_t, std::string_view, agentao::reply&&) {
        throw std::runtime_error("budget service down");
    };
    auto a = agentao::agent::create(config(ws, LOOP), std::move(t));
    agentao::turn_options opts;
    opts.max_iterations = 2;
    auto r = a.try_chat("work", opts);
    EXPECT_EQ(r.code(), agentao::status::host_error);
    EXPECT_TRUE(contains(r.error().what(), "budget service down")) << r.error().what();
}

TEST(Exceptions, EmitThrowsIsIgnored) {
    workspace ws;
    std::atomic<int> calls{0};
    agentao::transport t;
    t.emit = [&](std::string_view) {
        calls++;
        throw std::runtime_error("logger broke");
    };
    auto a = agentao::agent::create(config(ws, WRITE_TURN), std::move(t));
    EXPECT_EQ(a.chat("write"), "written");
    EXPECT_GT(calls.load(), 5);
    // Streaming still fans out after a throwing emit.
    auto s = a.stream_open("go");
    int items = 0;
    while (s.next(5s)) items++;
    EXPECT_GE(items, 1);
}

TEST(Exceptions, ObserverDeltaAndCompletionThrowsAreIgnored) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, WRITE_TURN + R"(,{"text":"streamed","chunk_size":2})"),
                                    agentao::transport{});
    std::atomic<int> observed{0}, deltas{0}, done{0};
    a.add_observer([&](std::string_view) {
        observed++;
        throw std::runtime_error("observer");
    });
    a.run("write", [&](agentao::turn_result r) {
        EXPECT_TRUE(r.ok());
        done++;
        throw std::runtime_error("completion");
    });
    ASSERT_TRUE(wait_until([&] { return done.load() == 1; }));
    EXPECT_EQ(observed.load(), 3);  // every event still reached the observer
    EXPECT_TRUE(wait_until([&] { return a.try_chat("next").ok(); }, 5s));
    a.stream(
        "stream",
        [&](std::string_view) {
            deltas++;
            throw std::runtime_error("delta");
        },
        [&](agentao::turn_result r) {
            EXPECT_TRUE(r.ok()) << r.message;
            done++;
        });
    ASSERT_TRUE(wait_until([&] { return done.load() == 2; }));
    EXPECT_EQ(deltas.load(), 4);  // "streamed" in chunks of 2: every delta delivered
}
