/* Telemetry from C: the host's traceparent per agent and per turn, the trace id read from
 * inside a callback, the exporter's status; bad input (NULL, malformed traceparent or
 * tracestate, bad UTF-8) gets a status and a message. The exporter points at a port nothing
 * listens on: the turns must not care (docs/observability.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define HOST_TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define HOST_PARENT "00-" HOST_TRACE "-00f067aa0ba902b7-01"
#define TURN_TRACE "0af7651916cd43dd8448eb211c80319c"
#define TURN_PARENT "00-" TURN_TRACE "-b7ad6b7169203331-01"

static char *trace_id(agentao_agent *agent) {
    char *id = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_trace_id(agent, &id, &err), AGENTAO_STATUS_OK);
    char *copy = strdup(id ? id : "");
    agentao_string_free(id);
    return copy;
}

static char *status_json(agentao_agent *agent) {
    char *json = NULL;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_telemetry_status(agent, &json, &err), AGENTAO_STATUS_OK);
    char *copy = strdup(json ? json : "");
    agentao_string_free(json);
    return copy;
}

static void test_without_an_exporter(const char *dir) {
    tu_section("no exporter");
    char *config = tu_config(dir, "{\"text\":\"hi\"}", NULL);
    agentao_agent *agent = tu_agent(config, NULL);
    char *id = trace_id(agent);
    CHECK_STR_EQ(id, "");
    free(id);
    free(tu_chat(agent, "go"));
    id = trace_id(agent);
    CHECK_STR_EQ(id, "");
    free(id);
    char *st = status_json(agent);
    CHECK_CONTAINS(st, "\"enabled\":false");
    free(st);
    /* Checked even so, and accepted. */
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_traceparent(agent, HOST_PARENT, NULL, &err), AGENTAO_STATUS_OK);

    tu_section("bad input");
    CHECK_FAILS_CONTAINING(agentao_agent_set_traceparent(NULL, HOST_PARENT, NULL, &err),
                           AGENTAO_STATUS_NULL_ARGUMENT, "agent");
    CHECK_FAILS_CONTAINING(agentao_agent_set_traceparent(agent, "00-xyz-00f067aa0ba902b7-01", NULL, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "trace id");
    CHECK_FAILS_CONTAINING(agentao_agent_set_traceparent(agent, "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                                                         NULL, &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "all zeros");
    CHECK_FAILS_CONTAINING(agentao_agent_set_turn_traceparent(agent, NULL, "a=b", &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "needs a traceparent");
    CHECK_FAILS_CONTAINING(agentao_agent_set_turn_traceparent(agent, HOST_PARENT, "no-equals", &err),
                           AGENTAO_STATUS_INVALID_ARGUMENT, "key=value");
    CHECK_FAILS_CONTAINING(agentao_agent_set_traceparent(agent, "00-\xff\xfe", NULL, &err),
                           AGENTAO_STATUS_INVALID_UTF8, "traceparent");
    char *out = TU_JUNK;
    CHECK_FAILS_CONTAINING(agentao_agent_trace_id(agent, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT, "trace_id_out");
    CHECK_FAILS_CONTAINING(agentao_agent_trace_id(NULL, &out, &err), AGENTAO_STATUS_NULL_ARGUMENT, "agent");
    CHECK(out == NULL);
    CHECK_FAILS_CONTAINING(agentao_agent_telemetry_status(agent, NULL, &err), AGENTAO_STATUS_NULL_ARGUMENT, "json_out");
    agentao_agent_free(agent);
    free(config);
}

/* Records the trace id that agentao_agent_trace_id gives inside the turn's emit callback. */
static void remember_trace_id(tu_recorder *rec, const char *event_json) {
    if (!strstr(event_json, "\"type\":\"turn_end\"")) return;
    char **slot = (char **)rec->user;
    agentao_agent *agent = (agentao_agent *)slot[0];
    free(slot[1]);
    slot[1] = trace_id(agent);
}

static void test_with_an_exporter_that_is_down(const char *dir) {
    tu_section("host traceparent");
    /* Port 9 (discard) on loopback: nothing answers; exports fail and are counted. */
    char *config = tu_config(dir, "{\"text\":\"one\"},{\"text\":\"two\"},{\"text\":\"three\"}",
                             "\"telemetry\": {\"endpoint\": \"http://127.0.0.1:9\", \"timeout_ms\": 500}");
    tu_recorder rec;
    tu_recorder_init(&rec);
    char *slot[2] = {NULL, NULL};
    rec.user = slot;
    rec.on_event = remember_trace_id;
    agentao_transport t = tu_recorder_transport(&rec, TU_SLOT_EMIT);
    agentao_agent *agent = tu_agent(config, &t);
    slot[0] = (char *)agent;
    agentao_error *err = NULL;
    CHECK_STATUS(agentao_agent_set_traceparent(agent, HOST_PARENT, "vendor=abc", &err), AGENTAO_STATUS_OK);
    free(tu_chat(agent, "first"));
    CHECK_STR_EQ(slot[1], HOST_TRACE);
    char *id = trace_id(agent);
    CHECK_STR_EQ(id, HOST_TRACE);
    free(id);

    tu_section("per-turn traceparent wins once");
    CHECK_STATUS(agentao_agent_set_turn_traceparent(agent, TURN_PARENT, NULL, &err), AGENTAO_STATUS_OK);
    free(tu_chat(agent, "second"));
    CHECK_STR_EQ(slot[1], TURN_TRACE);
    free(tu_chat(agent, "third"));
    CHECK_STR_EQ(slot[1], HOST_TRACE);

    char *st = status_json(agent);
    CHECK_CONTAINS(st, "\"enabled\":true");
    free(st);
    agentao_agent_free(agent);
    free(slot[1]);
    tu_recorder_destroy(&rec);
    free(config);
}

int main(void) {
    test_without_an_exporter(tu_workspace());
    test_with_an_exporter_that_is_down(tu_workspace());
    return tu_finish("test_telemetry");
}
