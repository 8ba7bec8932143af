// Telemetry through the binding: the host's traceparent per agent and per turn, the trace id
// read from inside a turn's emit callback, the exporter's status. The exporter points at a
// loopback port nothing listens on (9, discard): exports fail and the turns must not care.
#include <gtest/gtest.h>

#include <mutex>

#include "helpers.hpp"

using namespace th;

namespace {

const std::string HOST_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const std::string HOST_PARENT = "00-" + HOST_TRACE + "-00f067aa0ba902b7-01";
const std::string TURN_TRACE = "0af7651916cd43dd8448eb211c80319c";
const std::string TURN_PARENT = "00-" + TURN_TRACE + "-b7ad6b7169203331-01";
const std::string DOWN_EXPORTER = R"("telemetry":{"endpoint":"http://127.0.0.1:9","timeout_ms":500})";

// The trace id the agent reports inside the emit callback at each turn's end.
struct trace_ids_seen {
    std::mutex m;
    std::string last;
    agentao::agent* agent = nullptr;

    agentao::transport transport() {
        agentao::transport t;
        t.emit = [this](std::string_view ev) {
            if (!contains(std::string(ev), "\"type\":\"turn_end\"") || !agent) return;
            std::string id = agent->trace_id();
            std::lock_guard<std::mutex> g(m);
            last = id;
        };
        return t;
    }
    std::string get() {
        std::lock_guard<std::mutex> g(m);
        return last;
    }
};

// The status JSON is one object with the documented members, in the documented types.
void expect_status_shape(const std::string& json, bool enabled) {
    EXPECT_EQ(json.front(), '{') << json;
    EXPECT_EQ(json.back(), '}') << json;
    EXPECT_TRUE(contains(json, std::string("\"enabled\":") + (enabled ? "true" : "false"))) << json;
    for (const char* counter : {"exported_spans", "dropped_spans", "failed_exports"})
        EXPECT_TRUE(contains(json, "\"" + std::string(counter) + "\":")) << counter << " in " << json;
    EXPECT_TRUE(contains(json, "\"last_error\":")) << json;
}

}  // namespace

TEST(Telemetry, WithoutAnExporterTheTraceIdIsEmpty) {
    workspace ws;
    trace_ids_seen seen;
    auto a = agentao::agent::create(config(ws, R"({"text":"hi"})"), seen.transport());
    seen.agent = &a;
    EXPECT_EQ(a.trace_id(), "");
    a.set_traceparent(HOST_PARENT);  // checked even so, and accepted
    EXPECT_EQ(a.chat("go"), "hi");
    EXPECT_EQ(seen.get(), "");
    EXPECT_EQ(a.trace_id(), "");
    std::string status = a.telemetry_status();
    expect_status_shape(status, false);
    EXPECT_TRUE(contains(status, "\"last_error\":null")) << status;
}

TEST(Telemetry, MalformedValuesAreRefused) {
    workspace ws;
    auto a = agentao::agent::create(config(ws, R"({"text":"hi"})"));
    auto r = a.try_set_traceparent("00-xyz-00f067aa0ba902b7-01");
    EXPECT_EQ(r.code(), agentao::status::invalid_argument);
    EXPECT_TRUE(contains(r.error().what(), "trace id")) << r.error().what();
    EXPECT_EQ(a.try_set_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01").code(),
              agentao::status::invalid_argument);
    EXPECT_EQ(a.try_set_turn_traceparent(HOST_PARENT, "no-equals").code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.try_set_traceparent(std::string_view("00-\0", 4)).code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.try_set_traceparent(HOST_PARENT, std::string_view("a=b\0", 4)).code(),
              agentao::status::invalid_argument);
    EXPECT_EQ(a.try_set_traceparent("00-\xff\xfe").code(), agentao::status::invalid_utf8);
    EXPECT_THROW(a.set_turn_traceparent("garbage"), agentao::error);
    EXPECT_TRUE(a.try_clear_traceparent().ok());
    EXPECT_TRUE(a.try_clear_turn_traceparent().ok());
}

TEST(Telemetry, TraceparentPerAgentAndPerTurn) {
    workspace ws;
    trace_ids_seen seen;
    auto a = agentao::agent::create(
        config(ws, R"({"text":"one"},{"text":"two"},{"text":"three"},{"text":"four"},{"text":"five"})",
               DOWN_EXPORTER),
        seen.transport());
    seen.agent = &a;
    a.set_traceparent(HOST_PARENT, "vendor=abc");
    // A malformed value afterwards changes nothing: the turn is still the host's trace.
    EXPECT_EQ(a.try_set_traceparent("00-bad").code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.try_set_turn_traceparent("00-bad").code(), agentao::status::invalid_argument);
    EXPECT_EQ(a.chat("first"), "one");
    EXPECT_EQ(seen.get(), HOST_TRACE);
    EXPECT_EQ(a.trace_id(), HOST_TRACE);

    // The next turn's traceparent wins once, then the agent's again.
    a.set_turn_traceparent(TURN_PARENT);
    EXPECT_EQ(a.chat("second"), "two");
    EXPECT_EQ(seen.get(), TURN_TRACE);
    EXPECT_EQ(a.chat("third"), "three");
    EXPECT_EQ(seen.get(), HOST_TRACE);

    // Cleared: the turn starts a trace of its own.
    a.clear_traceparent();
    EXPECT_EQ(a.chat("fourth"), "four");
    std::string own = seen.get();
    EXPECT_EQ(own.size(), 32u) << own;
    EXPECT_NE(own, HOST_TRACE);
    EXPECT_NE(own, TURN_TRACE);

    // A withdrawn per-turn value never applies.
    a.set_turn_traceparent(TURN_PARENT);
    a.clear_turn_traceparent();
    EXPECT_EQ(a.chat("fifth"), "five");
    EXPECT_NE(seen.get(), TURN_TRACE);

    expect_status_shape(a.telemetry_status(), true);
}
