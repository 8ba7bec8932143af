// Package cbench drives the same workloads as the binding's benchmarks straight through the C
// API, so that the benchmarks can report the binding's own overhead (Go figure − C figure).
// Test support only.
package cbench

/*
#cgo pkg-config: agentao
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "agentao.h"

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void reset(agentao_agent *a) { agentao_agent_set_history(a, "[]", NULL); }

// One streamed turn through the pull stream; returns its time and writes the delta count.
static int64_t stream_turn(void *agent, int64_t *deltas) {
    agentao_agent *a = agent;
    int64_t t0 = now_ns(), n = 0;
    agentao_stream *s = NULL;
    if (agentao_agent_stream_open(a, "go", -1, NULL, &s, NULL) != AGENTAO_STATUS_OK) return -1;
    char *item = NULL;
    while (agentao_stream_next(s, 60000, &item, NULL) == AGENTAO_STATUS_OK) {
        n++;
        agentao_string_free(item);
    }
    agentao_stream_free(s);
    int64_t t = now_ns() - t0;
    reset(a);
    *deltas = n - 1; // the last item is the outcome
    return t;
}

// One chat turn; returns its time.
static int64_t chat_turn(void *agent) {
    agentao_agent *a = agent;
    int64_t t0 = now_ns();
    char *text = NULL;
    if (agentao_agent_chat(a, "go", -1, NULL, &text, NULL) != AGENTAO_STATUS_OK) return -1;
    agentao_string_free(text);
    int64_t t = now_ns() - t0;
    reset(a);
    return t;
}

static void emit_noop(void *ud, const char *json) { (void)json; (*(int64_t *)ud)++; }
static agentao_status subscribe_stub(void *ud, agentao_listener_fn l, void *lud, uint64_t *id) {
    (void)ud; (void)l; (void)lud; *id = 1; return AGENTAO_STATUS_OK;
}
static int64_t emits;

// An agent whose transport has a no-op C emit (as bench/bench.c has).
static void *new_agent_c_emit(const char *cfg) {
    agentao_transport t = {0};
    t.struct_size = sizeof t;
    t.userdata = &emits;
    t.emit = emit_noop;
    t.subscribe = subscribe_stub;
    agentao_agent *a = NULL;
    if (agentao_agent_new(cfg, &t, &a, NULL) != AGENTAO_STATUS_OK) return NULL;
    return a;
}

// A C-level host-event observer that keeps every event's text, one a line (the library writes
// compact JSON: a newline inside a string is escaped), for the tests that compare a binding
// observer with what the C API hands out. Observer calls of one agent never overlap.
typedef struct { char *buf; size_t len, cap; uint64_t id; } recording;

static void record_event(void *ud, const char *json) {
    recording *r = ud;
    size_t n = strlen(json);
    if (r->len + n + 1 > r->cap) {
        size_t cap = (r->len + n + 1) * 2;
        char *b = realloc(r->buf, cap);
        if (!b) return;
        r->buf = b, r->cap = cap;
    }
    memcpy(r->buf + r->len, json, n);
    r->buf[r->len + n] = '\n';
    r->len += n + 1;
}

static recording *record_start(void *agent) {
    recording *r = calloc(1, sizeof *r);
    if (r && agentao_agent_add_host_event_observer(agent, record_event, r, NULL, &r->id, NULL) != AGENTAO_STATUS_OK) {
        free(r);
        return NULL;
    }
    return r;
}

static void record_stop(void *agent, recording *r) { agentao_agent_remove_host_event_observer(agent, r->id); }
static void record_free(recording *r) { free(r->buf); free(r); }
*/
import "C"

import (
	"strings"
	"time"
	"unsafe"
)

// StreamTurn streams one turn on agent (an *agentao_agent) from C and resets its history.
func StreamTurn(agent unsafe.Pointer) (time.Duration, int) {
	var n C.int64_t
	t := C.stream_turn(agent, &n)
	return time.Duration(t), int(n)
}

// ChatTurn runs one chat turn on agent from C and resets its history.
func ChatTurn(agent unsafe.Pointer) time.Duration { return time.Duration(C.chat_turn(agent)) }

// ResetHistory empties agent's history.
func ResetHistory(agent unsafe.Pointer) { C.reset((*C.agentao_agent)(agent)) }

// NewAgentCEmit makes an agent with a no-op C emit; release with Free.
func NewAgentCEmit(cfg string) unsafe.Pointer {
	c := C.CString(cfg)
	defer C.free(unsafe.Pointer(c))
	return C.new_agent_c_emit(c)
}

// Free releases an agent made by NewAgentCEmit.
func Free(agent unsafe.Pointer) { C.agentao_agent_free((*C.agentao_agent)(agent)) }

// RecordHostEvents registers a C observer on agent that keeps the text of every host event;
// stop removes it and returns the texts in order (nil if the observer could not be added).
func RecordHostEvents(agent unsafe.Pointer) (stop func() []string) {
	r := C.record_start(agent)
	return func() []string {
		if r == nil {
			return nil
		}
		C.record_stop(agent, r)
		text := C.GoStringN(r.buf, C.int(r.len))
		C.record_free(r)
		if text == "" {
			return []string{}
		}
		return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
}
