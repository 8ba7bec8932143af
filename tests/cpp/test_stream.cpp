// Streams: callback deltas then the completion, pull streams (items, closed, cancelled,
// closing cancels), streaming without a fan-out, host-event streams and observers.
#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <vector>

#include "agentao_events.hpp"
#include "helpers.hpp"

using namespace th;

TEST(Stream, CallbackDeltasThenDone) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"streamed answer","chunk_size":3})"),
                                    agentao::transport{});
    std::mutex mu;
    std::string joined;
    std::atomic<int> after_done{0}, done{0};
    std::optional<agentao::turn_result> result;
    a.stream(
        "go",
        [&](std::string_view delta) {
            if (done.load()) after_done++;
            std::lock_guard<std::mutex> g(mu);
            joined += delta;  // the text itself, not JSON
        },
        [&](agentao::turn_result r) {
            std::lock_guard<std::mutex> g(mu);
            result = std::move(r);
            done = 1;
        });
    ASSERT_TRUE(wait_until([&] { return done.load() == 1; }));
    std::lock_guard<std::mutex> g(mu);
    EXPECT_TRUE(result->ok()) << result->message;
    EXPECT_EQ(joined, "streamed answer");
    EXPECT_TRUE(contains(result->outcome_json, kv("text", "streamed answer")));
    EXPECT_EQ(after_done.load(), 0);
}

TEST(Stream, OnDeltaGetsTheTextDecoded) {
    // Escapes, a newline, a tab, a non-ASCII letter and a character beyond the BMP (a
    // surrogate pair if escaped) arrive as the text itself; stream_json keeps the JSON.
    workspace ws;
    auto a = agentao::agent::create(
        config(ws, R"({"chunks":["say \"hi\"\n","w\u00f6rld\t","\ud83d\ude00 \\ / end"]},)"
                   R"({"chunks":["json"]})"));
    std::mutex mu;
    std::vector<std::string> texts;
    std::atomic<int> done{0};
    a.stream(
        "go",
        [&](std::string_view text) {
            std::lock_guard<std::mutex> g(mu);
            texts.emplace_back(text);
        },
        [&](agentao::turn_result r) {
            EXPECT_TRUE(r.ok()) << r.message;
            done = 1;
        });
    ASSERT_TRUE(wait_until([&] { return done.load() == 1; }));
    {
        std::lock_guard<std::mutex> g(mu);
        std::vector<std::string> want{"say \"hi\"\n", "w\xc3\xb6rld\t", "\xf0\x9f\x98\x80 \\ / end"};
        EXPECT_EQ(texts, want);
    }
    std::string json;
    a.stream_json(
        "again", [&](std::string_view d) { std::lock_guard<std::mutex> g(mu); json += d; },
        [&](agentao::turn_result) { done = 2; });
    ASSERT_TRUE(wait_until([&] { return done.load() == 2; }));
    std::lock_guard<std::mutex> g(mu);
    EXPECT_EQ(json, R"({"type":"text_delta","text":"json"})");
}

TEST(Stream, WorksWithoutFanOut) {
    // The default transport has no fan-out (no C subscribe slot): both streams work.
    workspace ws;
    agentao::transport t;
    EXPECT_FALSE(t.fan_out);
    std::atomic<int> emits{0};
    t.emit = [&](std::string_view) { emits++; };
    auto a = agentao::agent::create(
        config(ws, R"({"chunks":["no ","fan"]},{"chunks":["pulled ","too"]})"), std::move(t));
    std::mutex mu;
    std::string joined;
    std::atomic<int> done{0};
    a.stream_json(
        "go",
        [&](std::string_view delta_json) {
            std::lock_guard<std::mutex> g(mu);
            joined += delta_json;
            joined += '\n';
        },
        [&](agentao::turn_result r) {
            EXPECT_TRUE(r.ok()) << r.message;
            done = 1;
        });
    ASSERT_TRUE(wait_until([&] { return done.load() == 1; }));
    {
        std::lock_guard<std::mutex> g(mu);
        EXPECT_EQ(joined, "{\"type\":\"text_delta\",\"text\":\"no \"}\n"
                          "{\"type\":\"text_delta\",\"text\":\"fan\"}\n");
    }
    EXPECT_GT(emits.load(), 0);
    auto s = a.stream_open("again");
    std::vector<std::string> items;
    while (auto item = s.next(5s)) items.emplace_back(*item);
    ASSERT_EQ(items.size(), 3u);
    EXPECT_TRUE(contains(items[0], kv("text", "pulled ")));
    EXPECT_TRUE(contains(items[2], kv("text", "pulled too"))) << items[2];
    // A transport that asks for the fan-out still streams, as before.
    agentao::transport f;
    f.fan_out = true;
    auto b = agentao::agent::create(config(ws, R"({"text":"y"})"), std::move(f));
    auto bs = b.stream_open("go");
    std::string last;
    while (auto item = bs.next(5s)) last = *item;
    EXPECT_TRUE(contains(last, kv("text", "y"))) << last;
}

TEST(Stream, PullItemsThenClosed) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"pulled text","chunk_size":4})"),
                                    agentao::transport{});
    auto s = a.stream_open("go");
    std::string joined, outcome;
    int items = 0;
    while (auto item = s.next(5s)) {
        items++;
        if (contains(*item, "\"text_delta\"")) {
            EXPECT_TRUE(outcome.empty()) << "a delta after the outcome";
            joined += json_str(*item, "text");
        } else {
            outcome = *item;
        }
    }
    EXPECT_EQ(joined, "pulled text");
    EXPECT_TRUE(contains(outcome, "\"type\":\"turn_outcome\"")) << outcome;
    EXPECT_GE(items, 3);
    // Closed stays closed.
    auto again = s.try_next(10ms);
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again.value().has_value());
}

TEST(Stream, PullTimeoutAndCancel) {
    workspace ws;
    auto a = agentao::agent::create(
        config(ws, R"({"text":"slow words here","chunk_size":1,"delay_ms":50})"), agentao::transport{});
    agentao::cancel_token tok;
    agentao::turn_options opts;
    opts.cancel = &tok;
    auto s = a.stream_open("go", opts);
    auto first = s.try_next(1ms);
    if (!first) {
        EXPECT_EQ(first.code(), agentao::status::timeout);
    }
    tok.cancel("pull-stop");
    agentao::status end = agentao::status::ok;
    for (int i = 0; i < 100; i++) {
        auto r = s.try_next(5s);
        if (!r) {
            end = r.code();
            EXPECT_TRUE(contains(r.error().what(), "pull-stop")) << r.error().what();
            break;
        }
        ASSERT_TRUE(r.value().has_value()) << "closed without the cancelled status";
    }
    EXPECT_EQ(end, agentao::status::cancelled);
    EXPECT_TRUE(contains(a.last_turn(), kv("status", "cancelled")));
}

TEST(Stream, DestroyingTheStreamCancelsTheTurn) {
    workspace ws;
    auto a = agentao::agent::create(
        config(ws, R"({"repeat_text":{"unit":"w ","count":200},"delay_ms":20},{"text":"next"})"),
        agentao::transport{});
    {
        auto s = a.stream_open("go");
        auto item = s.next(5s);
        ASSERT_TRUE(item.has_value());
    }
    ASSERT_TRUE(wait_until([&] { return contains(a.last_turn(), kv("status", "cancelled")); }, 5s))
        << a.last_turn();
    EXPECT_TRUE(contains(a.last_turn(), kv("error", "async-cancel")));
    EXPECT_TRUE(wait_until([&] { return a.try_chat("again").ok(); }, 5s));
}

TEST(HostEvents, StreamFiltersAndObservers) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, WRITE_TURN));
    auto sid = a.session_id();
    auto all = a.host_events();
    EXPECT_EQ(a.try_host_events().code(), agentao::status::stream_subscribe);
    auto mine = a.host_events(sid);
    EXPECT_EQ(a.try_host_events(sid).code(), agentao::status::stream_subscribe);

    std::mutex mu;
    std::vector<std::string> observed;
    auto alive = std::make_shared<int>(0);
    auto id = a.add_observer([&, alive](std::string_view ev) {
        std::lock_guard<std::mutex> g(mu);
        observed.emplace_back(ev);
    });
    EXPECT_EQ(all.try_next(20ms).code(), agentao::status::timeout);
    EXPECT_EQ(a.chat("write"), "written");

    const char* want[] = {"permission_decision", "tool_lifecycle", "tool_lifecycle"};
    for (const char* w : want) {
        auto ev = all.next(5s);
        ASSERT_TRUE(ev.has_value());
        EXPECT_EQ(json_str(*ev, "event_type"), w) << *ev;
        EXPECT_EQ(json_str(*ev, "session_id"), sid);
        EXPECT_TRUE(contains(*ev, kv("tool_call_id", "w1")));
        auto same = mine.next(5s);
        ASSERT_TRUE(same.has_value());
        EXPECT_TRUE(contains(*same, w));
    }
    EXPECT_EQ(all.try_next(50ms).code(), agentao::status::timeout);
    {
        std::lock_guard<std::mutex> g(mu);
        ASSERT_EQ(observed.size(), 3u);
        EXPECT_EQ(json_str(observed[0], "event_type"), "permission_decision");
    }
    // A closed stream frees its filter.
    all = agentao::host_event_stream();
    auto reopened = a.host_events();
    // Removing the observer releases its function once.
    EXPECT_TRUE(a.remove_observer(id));
    EXPECT_FALSE(a.remove_observer(id));
    EXPECT_EQ(alive.use_count(), 1);
    a.chat("again");
    std::lock_guard<std::mutex> g(mu);
    EXPECT_EQ(observed.size(), 3u);
}

// The generated wire names (agentao_events.hpp, from the v3 schema) are the keys and values
// of the events the library streams: each event has exactly the keys its type lists.
// `flat`: the event holds no nested object, so every `":` is one of its own keys.
template <class Event>
static void expect_wire_form(const std::string& ev, bool flat) {
    EXPECT_EQ(json_str(ev, "event_type"), Event::event_type) << ev;
    size_t keys = 1;  // event_type
    for (auto key : Event::keys) {
        EXPECT_TRUE(contains(ev, "\"" + std::string(key) + "\":")) << key << " in " << ev;
        keys++;
    }
    size_t colons = 0;
    for (size_t p = 0; (p = ev.find("\":", p)) != std::string::npos; p++) colons++;
    if (flat) {
        EXPECT_EQ(colons, keys) << ev;
    }
}

TEST(HostEvents, GeneratedWireNamesMatchTheEvents) {
    namespace he = agentao::host_events;
    static_assert(he::tool_lifecycle::event_type == "tool_lifecycle");
    static_assert(he::permission_decision::event_type == "permission_decision");
    static_assert(he::subagent_lifecycle::event_type == "subagent_lifecycle");
    workspace ws;
    auto a = agentao::agent::create(config(ws, WRITE_TURN));
    auto all = a.host_events();
    EXPECT_EQ(a.chat("write"), "written");
    auto decision = all.next(5s);
    ASSERT_TRUE(decision.has_value());
    expect_wire_form<he::permission_decision>(*decision, false);
    bool known_outcome = false;
    for (auto v : he::permission_decision::outcome_values)
        known_outcome |= json_str(*decision, "outcome") == v;
    EXPECT_TRUE(known_outcome) << *decision;
    for (const char* phase : {"started", "completed"}) {
        auto ev = all.next(5s);
        ASSERT_TRUE(ev.has_value());
        expect_wire_form<he::tool_lifecycle>(*ev, true);
        EXPECT_EQ(json_str(*ev, "phase"), phase);
        bool listed = false;
        for (auto v : he::tool_lifecycle::phase_values) listed |= v == phase;
        EXPECT_TRUE(listed) << phase;
    }
}

TEST(HostEvents, ObserverReleasedWithTheAgent) {
    workspace ws;
    auto alive = std::make_shared<int>(0);
    {
        auto a = agentao::agent::create(config(ws, R"({"text":"x"})"));
        a.add_observer([alive](std::string_view) {});
        EXPECT_EQ(alive.use_count(), 2);
    }
    EXPECT_EQ(alive.use_count(), 1);
}

TEST(HostEvents, CloseWakesAReaderOnAnotherThread) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, WRITE_TURN));
    auto events = a.host_events();
    // The end of a stream is an empty optional.
    std::atomic<bool> ended{false};
    std::thread reader([&] {
        auto r = events.try_next();
        ended = r.ok() && !r.value().has_value();
    });
    std::this_thread::sleep_for(100ms);
    auto t0 = std::chrono::steady_clock::now();
    events.close();
    reader.join();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    EXPECT_TRUE(ended.load());
    auto after = events.try_next(0ms);
    EXPECT_TRUE(after.ok() && !after.value().has_value());
    // Its filter is free again.
    auto again = a.host_events();
}
