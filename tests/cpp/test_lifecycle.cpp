// Lifecycle and bad input: RAII owners, moves, errors mapped to agentao::error / result<T>,
// cancel tokens, the transport released exactly once.
#include <gtest/gtest.h>

#include <memory>
#include <type_traits>

#include "helpers.hpp"

using namespace th;

static_assert(!std::is_copy_constructible_v<agentao::agent>);
static_assert(!std::is_copy_assignable_v<agentao::agent>);
static_assert(std::is_nothrow_move_constructible_v<agentao::agent>);
static_assert(std::is_nothrow_move_assignable_v<agentao::agent>);
static_assert(!std::is_copy_constructible_v<agentao::cancel_token>);
static_assert(std::is_nothrow_move_constructible_v<agentao::cancel_token>);
static_assert(!std::is_copy_constructible_v<agentao::stream>);
static_assert(std::is_nothrow_move_constructible_v<agentao::stream>);
static_assert(!std::is_copy_constructible_v<agentao::host_event_stream>);
static_assert(std::is_nothrow_move_constructible_v<agentao::host_event_stream>);
static_assert(!std::is_copy_constructible_v<agentao::reply>);
static_assert(std::is_nothrow_move_constructible_v<agentao::reply>);

TEST(Lifecycle, VersionMatchesHeader) {
    EXPECT_EQ(agentao::version(), AGENTAO_VERSION);
    EXPECT_EQ(agentao::version_number(), static_cast<uint32_t>(AGENTAO_VERSION_NUMBER));
    EXPECT_TRUE(contains(agentao::host_events_schema(), "\"$schema\""));
}

TEST(Lifecycle, CreateChatHistoryDestroy) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"hello there"},{"text":"again"})"));
    EXPECT_EQ(a.session_id().size(), 36u);
    EXPECT_EQ(a.last_turn(), "null");
    EXPECT_EQ(a.chat("hi"), "hello there");
    auto last = a.last_turn();
    EXPECT_TRUE(contains(last, kv("status", "ok"))) << last;
    EXPECT_TRUE(contains(last, "\"is_answer\":true")) << last;
    auto hist = a.history();
    EXPECT_TRUE(contains(hist, "hello there")) << hist;
    a.set_history(R"([{"role":"user","content":"earlier"}])");
    EXPECT_TRUE(contains(a.history(), "earlier"));
    EXPECT_FALSE(contains(a.history(), "hello there"));
    EXPECT_EQ(a.chat("more"), "again");
}

TEST(Lifecycle, MovedFromAgentIsNullArgument) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"x"})"));
    auto b = std::move(a);
    EXPECT_EQ(a.get(), nullptr);
    EXPECT_NE(b.get(), nullptr);
    auto r = a.try_chat("hi");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), agentao::status::null_argument);
    EXPECT_EQ(a.session_id(), "");
    try {
        a.history();
        FAIL() << "no exception";
    } catch (const agentao::error& e) {
        EXPECT_EQ(e.code(), agentao::status::null_argument);
    }
    agentao::agent empty;
    EXPECT_EQ(empty.try_usage().code(), agentao::status::null_argument);
    EXPECT_EQ(empty.try_add_observer([](std::string_view) {}).code(), agentao::status::null_argument);
    EXPECT_FALSE(empty.remove_observer(1));
    // An empty function is refused before it could be called.
    EXPECT_EQ(b.try_add_observer(nullptr).code(), agentao::status::null_argument);
    // Move assignment releases the target's agent.
    auto c = agentao::agent::create(config(ws, R"({"text":"y"})"));
    c = std::move(b);
    EXPECT_EQ(c.chat("hi"), "x");
}

TEST(BadInput, ConfigErrorsAreExceptions) {
    try {
        agentao::agent::create("{not json");
        FAIL() << "no exception";
    } catch (const agentao::error& e) {
        EXPECT_EQ(e.code(), agentao::status::invalid_json);
        EXPECT_STRNE(e.what(), "");
    }
    workspace ws;
    auto r = agentao::agent::try_create(R"({"working_directory":")" + ws.path().string() +
                                        R"(","llm":{"provider":"nope"}})");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), agentao::status::invalid_config);
    EXPECT_TRUE(contains(r.error().what(), "provider")) << r.error().what();
    // value() of a failed result throws the carried error.
    EXPECT_THROW(r.value(), agentao::error);
    auto bad_utf8 = agentao::agent::try_create("{\"working_directory\":\"\xff\xfe\"}");
    EXPECT_EQ(bad_utf8.code(), agentao::status::invalid_utf8);
    auto nul = agentao::agent::try_create(std::string_view("{}\0{}", 5));
    EXPECT_EQ(nul.code(), agentao::status::invalid_argument);
}

TEST(BadInput, StringsAndJson) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"x"})"));
    EXPECT_EQ(a.try_chat("bad \xc3\x28 utf8").code(), agentao::status::invalid_utf8);
    EXPECT_EQ(a.try_chat(std::string_view("a\0b", 3)).code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.try_set_history("[{").code(), agentao::status::invalid_json);
    EXPECT_EQ(a.try_set_history(R"([{"role":"wizard","content":"x"}])").code(),
              agentao::status::invalid_argument);
    EXPECT_EQ(a.try_set_permission_mode("read-only").code(), agentao::status::no_engine);
    EXPECT_THROW(a.set_permission_mode("read-only"), agentao::error);
    // Nothing above used the script.
    EXPECT_EQ(a.chat("hi"), "x");
}

TEST(Lifecycle, TransportReleasedExactlyOnce) {
    workspace ws;
    auto alive = std::make_shared<int>(0);
    {
        agentao::transport t;
        t.emit = [alive](std::string_view) { ++*alive; };
        auto a = agentao::agent::create(config(ws, R"({"text":"x"})"), std::move(t));
        EXPECT_GE(alive.use_count(), 2);
        a.chat("hi");
        EXPECT_GT(*alive, 0);
    }
    EXPECT_TRUE(wait_until([&] { return alive.use_count() == 1; }, 5s));
    // A failed creation releases it too (the library calls userdata_free).
    {
        agentao::transport t;
        t.emit = [alive](std::string_view) {};
        EXPECT_EQ(agentao::agent::try_create("{", std::move(t)).code(), agentao::status::invalid_json);
    }
    EXPECT_EQ(alive.use_count(), 1);
    {
        agentao::transport t;
        t.emit = [alive](std::string_view) {};
        EXPECT_EQ(agentao::agent::try_create(std::string_view("{\0", 2), std::move(t)).code(),
                  agentao::status::invalid_argument);
    }
    EXPECT_EQ(alive.use_count(), 1);
}

TEST(Lifecycle, TurnInProgressAndReentrant) {
    workspace ws;
    std::atomic<int> reentrant{-1};
    agentao::agent* self = nullptr;
    agentao::transport t;
    t.emit = [&](std::string_view ev) {
        if (reentrant.load() == -1 && contains(std::string(ev), "\"turn_end\"") && self)
            reentrant = static_cast<int>(self->try_chat("inner").code());
    };
    auto a = agentao::agent::create(
        config(ws, R"({"text":"slow","chunk_size":1,"delay_ms":100},{"text":"x"})"), std::move(t));
    self = &a;
    std::atomic<int> done{0};
    a.run("first", [&](agentao::turn_result r) {
        EXPECT_TRUE(r.ok()) << r.message;
        done = 1;
    });
    auto second = a.try_chat("second");
    EXPECT_EQ(second.code(), agentao::status::turn_in_progress);
    EXPECT_THROW(a.run("third", nullptr), agentao::error);
    ASSERT_TRUE(wait_until([&] { return done.load() == 1; }));
    EXPECT_EQ(reentrant.load(), static_cast<int>(agentao::status::reentrant));
}

TEST(CancelToken, ReasonsAndChildren) {
    agentao::cancel_token t;
    EXPECT_FALSE(t.is_cancelled());
    EXPECT_EQ(t.reason(), "");
    std::string reason = "first-reason";
    t.cancel(reason);
    reason.assign("XXXXXXXXXXXX");
    t.cancel("second-reason");
    EXPECT_TRUE(t.is_cancelled());
    EXPECT_EQ(t.reason(), "first-reason");

    agentao::cancel_token u;
    u.cancel();
    EXPECT_EQ(u.reason(), "user-cancel");

    agentao::cancel_token parent;
    auto a = parent.child();
    auto b = parent.child();
    auto grandchild = b.child();
    a.cancel("child-only");
    EXPECT_FALSE(parent.is_cancelled());
    EXPECT_FALSE(b.is_cancelled());
    parent.cancel("parent-stop");
    EXPECT_TRUE(grandchild.is_cancelled());
    EXPECT_EQ(grandchild.reason(), "parent-stop");
    EXPECT_EQ(a.reason(), "child-only");

    // Moved-from tokens are empty and harmless.
    agentao::cancel_token moved = std::move(a);
    EXPECT_EQ(a.get(), nullptr);
    EXPECT_FALSE(a.is_cancelled());
    a.cancel();
    EXPECT_EQ(a.try_reason().code(), agentao::status::null_argument);
    EXPECT_TRUE(moved.is_cancelled());
}
