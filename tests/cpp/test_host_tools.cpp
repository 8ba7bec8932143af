// Host tools through the C++ binding: a scripted turn calls the host's tool, its result reaches
// the model; an exception (or a dropped reply) becomes a tool error, never an unwind into C;
// async replies from another thread; a late reply after cancel is harmless; bad input.
#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <thread>

#include "helpers.hpp"

using namespace th;

namespace host_tools_test {

const std::string SCHEMA =
    R"({"type":"object","properties":{"key":{"type":"string"}},"required":["key"]})";

agentao::tool_spec lookup_spec() {
    agentao::tool_spec s;
    s.name = "lookup";
    s.description = "Looks a key up in the host's table.";
    s.parameters_json = SCHEMA;
    s.read_only = true;
    return s;
}

std::string call_lookup(const std::string& key, const std::string& final_text = "done") {
    return R"({"tool_calls":[{"id":"c1","name":"lookup","arguments":{"key":")" + key +
           R"("}}]},{"text":")" + final_text + R"("})";
}

// Host events, collected by an observer.
struct observed {
    std::mutex mu;
    std::string all;
    void add(agentao::agent& a) {
        a.add_observer([this](std::string_view ev) {
            std::lock_guard<std::mutex> g(mu);
            all.append(ev).append("\n");
        });
    }
    std::string text() {
        std::lock_guard<std::mutex> g(mu);
        return all;
    }
};

}  // namespace host_tools_test

using namespace host_tools_test;

TEST(HostTools, ResultReachesTheModel) {
    workspace ws;
    auto captured = std::make_shared<int>(7);
    std::weak_ptr<int> alive = captured;
    {
        std::mutex mu;
        std::string emitted;  // transport events: tool_output carries the streamed chunks
        agentao::transport tr;
        tr.emit = [&](std::string_view e) {
            std::lock_guard<std::mutex> g(mu);
            emitted.append(e).append("\n");
        };
        auto a = agentao::agent::create(config(ws, call_lookup("k1")), std::move(tr));
        std::atomic<int> calls{0};
        std::string seen_args, seen_id;
        a.add_tool(lookup_spec(), [&, captured](std::string_view args, const agentao::tool_call& call) {
            calls++;
            seen_args = std::string(args);
            seen_id = std::string(call.id());
            EXPECT_FALSE(call.cancelled());
            EXPECT_TRUE(call.try_output("chunk from the host").ok());
            return "value of " + std::string(args);
        });
        captured.reset();
        EXPECT_EQ(a.chat("look k1 up"), "done");
        EXPECT_EQ(calls.load(), 1);
        EXPECT_EQ(seen_args, R"({"key":"k1"})");
        EXPECT_EQ(seen_id, "c1");
        auto hist = a.history();
        EXPECT_TRUE(contains(hist, R"(value of {\"key\":\"k1\"})")) << hist;
        {
            std::lock_guard<std::mutex> g(mu);
            EXPECT_TRUE(contains(emitted, "chunk from the host")) << emitted;
            EXPECT_TRUE(contains(emitted, kv("call_id", "c1"))) << emitted;
        }
        auto last = a.last_turn();
        EXPECT_TRUE(contains(last, "\"tool_count\":1")) << last;
        EXPECT_FALSE(alive.expired());  // still registered
    }
    // The agent is gone: the library released the handler (and what it captured).
    EXPECT_TRUE(alive.expired());
}

TEST(HostTools, ToolErrorKeepsItsType) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, call_lookup("nope")));
    observed ev;
    ev.add(a);
    a.add_tool(lookup_spec(), [](std::string_view, const agentao::tool_call&) -> std::string {
        throw agentao::tool_error("KeyError", "no such key");
    });
    EXPECT_EQ(a.chat("look it up"), "done");
    auto hist = a.history();
    EXPECT_TRUE(contains(hist, "Error executing lookup: no such key")) << hist;
    auto events = ev.text();
    EXPECT_TRUE(contains(events, kv("error_type", "KeyError"))) << events;
}

TEST(HostTools, AnyExceptionIsAToolErrorAndTheTurnGoesOn) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, call_lookup("a", "first") + "," + call_lookup("b", "second") +
                                                   "," + call_lookup("c", "third")));
    observed ev;
    ev.add(a);
    a.add_tool(lookup_spec(), [](std::string_view, const agentao::tool_call&) -> std::string {
        throw std::out_of_range("table index 7");
    });
    EXPECT_EQ(a.chat("one"), "first");
    EXPECT_TRUE(contains(a.history(), "Error executing lookup: table index 7")) << a.history();
    EXPECT_TRUE(contains(ev.text(), kv("error_type", "HostToolError"))) << ev.text();

    // Not a std::exception, thrown by an async handler before it answered.
    a.add_async_tool(
        lookup_spec(), [](std::string_view, agentao::tool_call, agentao::tool_reply&&) { throw 42; },
        true);
    EXPECT_EQ(a.chat("two"), "second");
    EXPECT_TRUE(contains(a.history(), "the host tool threw: an exception that is not a std::exception"))
        << a.history();

    // Dropping the reply without answering fails the call instead of leaving the turn waiting.
    a.add_async_tool(
        lookup_spec(), [](std::string_view, agentao::tool_call, agentao::tool_reply&&) {}, true);
    EXPECT_EQ(a.chat("three"), "third");
    EXPECT_TRUE(contains(a.history(), "the host dropped the tool call without answering")) << a.history();
}

TEST(HostTools, AsyncReplyFromAnotherThread) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, call_lookup("k2")));
    std::thread worker;
    std::atomic<bool> answered_ok{false};
    a.add_async_tool(lookup_spec(), [&](std::string_view args, agentao::tool_call call,
                                        agentao::tool_reply&& reply) {
        std::string copy(args);
        worker = std::thread([copy, call, r = std::move(reply), &answered_ok]() mutable {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
            EXPECT_TRUE(call.try_output("working").ok());
            answered_ok = r.try_answer("async " + copy).ok();
            EXPECT_FALSE(r.pending());
            // A second answer is refused by the binding, not sent to the library.
            EXPECT_EQ(r.try_answer("again").code(), agentao::status::null_argument);
        });
    });
    EXPECT_EQ(a.chat("go"), "done");
    worker.join();
    EXPECT_TRUE(answered_ok.load());
    EXPECT_TRUE(contains(a.history(), R"(async {\"key\":\"k2\"})")) << a.history();
}

TEST(HostTools, LateReplyAfterCancelIsHarmless) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, call_lookup("slow") + R"(,{"text":"next turn"})"));
    std::mutex mu;
    std::optional<agentao::tool_reply> kept;
    std::optional<agentao::tool_call> kept_call;
    a.add_async_tool(lookup_spec(), [&](std::string_view, agentao::tool_call call,
                                        agentao::tool_reply&& reply) {
        std::lock_guard<std::mutex> g(mu);
        kept.emplace(std::move(reply));
        kept_call.emplace(call);
    });
    agentao::cancel_token tok;
    agentao::turn_options opts;
    opts.cancel = &tok;
    std::atomic<bool> done{false};
    agentao::turn_result res;
    a.run("go", [&](agentao::turn_result r) { res = std::move(r); done = true; }, opts);
    ASSERT_TRUE(wait_until([&] { std::lock_guard<std::mutex> g(mu); return kept.has_value(); }));
    {
        std::lock_guard<std::mutex> g(mu);
        EXPECT_FALSE(kept_call->cancelled());
    }
    auto t0 = std::chrono::steady_clock::now();
    tok.cancel();
    ASSERT_TRUE(wait_until([&] { return done.load(); }));
    std::printf("cancel with a pending host tool: turn ended in %lld ms\n", ms_since(t0));
    EXPECT_EQ(res.code, agentao::status::cancelled) << res.message;
    {
        std::lock_guard<std::mutex> g(mu);
        EXPECT_TRUE(kept_call->cancelled());
        // The late answer is accepted or refused, but never reaches the history or crashes.
        (void)kept->try_answer("too late");
        EXPECT_FALSE(kept->pending());
    }
    EXPECT_FALSE(contains(a.history(), "too late")) << a.history();
    // The agent is still usable (the cancelled turn did not read the script's "done").
    EXPECT_EQ(a.chat("again"), "done");
}

TEST(HostTools, OnCancelLetsAWaitingHandlerAnswer) {
    // A handler parked on something else learns of the turn's cancel from a watch, without
    // polling `cancelled()`, and the watch runs once, on the cancelling thread.
    workspace ws;
    auto a = agentao::agent::create(config(ws, call_lookup("slow") + R"(,{"text":"next turn"})"));
    std::mutex mu;
    std::vector<std::string> reasons;
    std::thread::id watch_thread;
    std::optional<agentao::cancel_watch> watch;
    a.add_async_tool(lookup_spec(), [&](std::string_view, agentao::tool_call call,
                                        agentao::tool_reply&& reply) {
        auto kept = std::make_shared<agentao::tool_reply>(std::move(reply));
        auto w = call.on_cancel([&, kept](std::string_view reason) {
            std::lock_guard<std::mutex> g(mu);
            reasons.emplace_back(reason);
            watch_thread = std::this_thread::get_id();
            (void)kept->try_answer("stopped");
        });
        std::lock_guard<std::mutex> g(mu);
        watch.emplace(std::move(w));
    });
    agentao::cancel_token tok;
    agentao::turn_options opts;
    opts.cancel = &tok;
    std::atomic<bool> done{false};
    agentao::turn_result res;
    a.run("go", [&](agentao::turn_result r) { res = std::move(r); done = true; }, opts);
    ASSERT_TRUE(wait_until([&] { std::lock_guard<std::mutex> g(mu); return watch.has_value(); }));
    {
        std::lock_guard<std::mutex> g(mu);
        EXPECT_TRUE(reasons.empty()) << "the watch ran before the cancel";
    }
    tok.cancel("host-stop");
    ASSERT_TRUE(wait_until([&] { return done.load(); }));
    EXPECT_EQ(res.code, agentao::status::cancelled) << res.message;
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(reasons.size(), 1u);
    EXPECT_EQ(reasons[0], "host-stop");
    EXPECT_EQ(watch_thread, std::this_thread::get_id()) << "the watch ran off the cancelling thread";
    // It ran: removing it now reports that.
    EXPECT_FALSE(watch->remove());
    EXPECT_FALSE(contains(a.history(), "stopped")) << a.history();
}

TEST(HostTools, OnCancelRefusesAnEmptyCallbackAndABorrowedNull) {
    EXPECT_EQ(agentao::cancel_watch::try_watch(nullptr, [](std::string_view) {}).code(),
              agentao::status::null_argument);
    agentao::cancel_token tok;
    EXPECT_EQ(agentao::cancel_watch::try_watch(tok.get(), nullptr).code(),
              agentao::status::null_argument);
}

TEST(HostTools, AnAnswerWithANulByteIsRefusedNotCutShort) {
    // The model would read "visible" of "visible\0HIDDEN": the binding refuses the answer and
    // fails the call with why, as its other string arguments do.
    using namespace std::string_view_literals;
    workspace ws;
    auto a = agentao::agent::create(config(ws, call_lookup("k") + "," + call_lookup("k2", "next")));
    std::mutex mu;
    std::vector<agentao::status> codes;
    int n = 0;
    a.add_async_tool(lookup_spec(), [&](std::string_view, agentao::tool_call, agentao::tool_reply&& r) {
        std::lock_guard<std::mutex> g(mu);
        auto res = (n++ == 0) ? r.try_answer("visible\0HIDDEN"sv) : r.try_fail("Type"sv, "msg\0HIDDEN"sv);
        codes.push_back(res.code());
        EXPECT_FALSE(r.pending());
    });
    EXPECT_EQ(a.chat("go"), "done");
    EXPECT_EQ(a.chat("again"), "next");
    std::lock_guard<std::mutex> g(mu);
    ASSERT_EQ(codes.size(), 2u);
    EXPECT_EQ(codes[0], agentao::status::invalid_argument);
    EXPECT_EQ(codes[1], agentao::status::invalid_argument);
    auto hist = a.history();
    EXPECT_TRUE(contains(hist, "the tool result contains a NUL byte")) << hist;
    EXPECT_TRUE(contains(hist, "the error message contains a NUL byte")) << hist;
    EXPECT_FALSE(contains(hist, "visible")) << hist;
}

TEST(HostTools, RegistrationErrorsAndRemove) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"x"})"));
    auto ok = [](std::string_view, const agentao::tool_call&) { return std::string("r"); };
    a.add_tool(lookup_spec(), ok);
    // A name in use, without replace.
    EXPECT_EQ(a.try_add_tool(lookup_spec(), ok).code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.try_add_tool(lookup_spec(), ok, true).code(), agentao::status::ok);
    auto bad = lookup_spec();
    bad.name = "mcp_x";
    EXPECT_EQ(a.try_add_tool(bad, ok).code(), agentao::status::invalid_argument);
    bad = lookup_spec();
    bad.name = "other";
    bad.parameters_json = "{not json";
    EXPECT_EQ(a.try_add_tool(bad, ok).code(), agentao::status::invalid_json);
    bad.parameters_json = std::string("{}\0x", 4);
    EXPECT_EQ(a.try_add_tool(bad, ok).code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.try_add_tool(lookup_spec(), nullptr).code(), agentao::status::null_argument);
    EXPECT_EQ(a.try_add_async_tool(lookup_spec(), nullptr).code(), agentao::status::null_argument);
    try {
        a.add_tool(lookup_spec(), ok);
        FAIL() << "no exception";
    } catch (const agentao::error& e) {
        EXPECT_EQ(e.code(), agentao::status::invalid_argument);
        EXPECT_TRUE(contains(e.what(), "lookup")) << e.what();
    }
    EXPECT_TRUE(a.remove_tool("lookup"));
    EXPECT_FALSE(a.remove_tool("lookup"));
    // A moved-from agent: refused, and the handler box is not leaked (ASan run).
    auto b = std::move(a);
    EXPECT_EQ(a.try_add_tool(lookup_spec(), ok).code(), agentao::status::null_argument);
    EXPECT_EQ(a.try_remove_tool("x").code(), agentao::status::null_argument);
    EXPECT_EQ(b.chat("hi"), "x");
}

// The library owns a tool's box from the call on and releases it once, also when it refuses
// the tool: the handler (and what it holds) is gone right after a refusal, and the binding does
// not release it a second time (ASan run).
TEST(HostTools, ARefusedToolIsReleasedByTheLibraryOnce) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"x"})"));
    auto held = std::make_shared<int>(0);
    auto holding = [held](std::string_view, const agentao::tool_call&) { return std::string("r"); };
    auto bad = lookup_spec();
    bad.name = "plan_save";
    EXPECT_EQ(a.try_add_tool(bad, holding).code(), agentao::status::invalid_argument);
    bad.name = "read_file";
    EXPECT_EQ(a.try_add_tool(bad, holding).code(), agentao::status::invalid_argument);
    EXPECT_EQ(held.use_count(), 2);  // `held` and the copy inside `holding`
    std::weak_ptr<int> watch = held;
    {
        auto only_in_box = [h = std::move(held)](std::string_view, const agentao::tool_call&) {
            return std::string(std::to_string(*h));
        };
        bad.name = "mcp_x";
        EXPECT_EQ(a.try_add_tool(bad, std::move(only_in_box)).code(), agentao::status::invalid_argument);
    }
    // `holding` still has its copy; the refused box's copy is gone.
    EXPECT_EQ(watch.use_count(), 1);
    EXPECT_EQ(a.chat("hi"), "x");
}

TEST(Broadcaster, OwnsItsListeners) {
    auto seen = std::make_shared<std::vector<std::string>>();
    std::weak_ptr<std::vector<std::string>> alive = seen;
    {
        agentao::broadcaster b;
        auto id = b.subscribe([seen](std::string_view e) { seen->emplace_back(e); });
        b.subscribe([](std::string_view) { throw std::runtime_error("dropped"); });
        b.notify(R"({"type":"x"})");
        b.unsubscribe(id);
        b.notify(R"({"type":"y"})");
        EXPECT_EQ(b.try_subscribe(nullptr).code(), agentao::status::null_argument);
        EXPECT_EQ(b.try_notify(std::string("a\0b", 3)).code(), agentao::status::invalid_argument);
        ASSERT_EQ(seen->size(), 1u);
        EXPECT_EQ((*seen)[0], R"({"type":"x"})");
        seen.reset();
        // Unsubscribed: the broadcaster released the listener and what it captured.
        EXPECT_TRUE(alive.expired());
    }
    agentao::broadcaster moved;
    agentao::broadcaster empty = std::move(moved);
    EXPECT_EQ(moved.try_subscribe([](std::string_view) {}).code(), agentao::status::null_argument);
}
