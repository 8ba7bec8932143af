// The cgo floor (`bind-go --cgo-floor`): the C worker's calls made from Go through cgo, each
// callback a C trampoline into an exported Go function that only counts. What any Go host pays
// for the crossings alone, with no binding code: the Go binding's rows read against it.
package main

/*
#cgo pkg-config: agentao
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <agentao.h>

extern void goFloorCount(uintptr_t scenario);

// The one piece of C per callback: the crossing into Go.
static void floor_on_delta(void *ud, const char *json) { (void)json; goFloorCount((uintptr_t)ud); }

static void floor_on_emit(void *ud, const char *json) {
	if (strncmp(json, "{\"type\":\"llm_text\"", 18) == 0) goFloorCount((uintptr_t)ud);
}

// The stream's end, waited for in C as the C worker does (a Go waiter would cross again).
static pthread_mutex_t floor_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t floor_cv = PTHREAD_COND_INITIALIZER;
static int floor_done;
static agentao_status floor_status;

static void floor_on_done(void *ud, agentao_status st, const char *outcome, const agentao_error *err) {
	(void)ud, (void)outcome, (void)err;
	pthread_mutex_lock(&floor_mu);
	floor_status = st;
	floor_done = 1;
	pthread_cond_signal(&floor_cv);
	pthread_mutex_unlock(&floor_mu);
}

static agentao_status floor_new(const char *cfg, uintptr_t scenario, int with_emit, int observe,
                                agentao_agent **out) {
	agentao_transport t;
	memset(&t, 0, sizeof t);
	t.struct_size = sizeof t;
	t.userdata = (void *)scenario;
	t.emit = floor_on_emit;
	agentao_status st = agentao_agent_new(cfg, with_emit ? &t : NULL, out, NULL);
	if (st != AGENTAO_STATUS_OK || !observe) return st;
	uint64_t id;
	return agentao_agent_add_host_event_observer(*out, floor_on_delta, (void *)scenario, NULL, &id, NULL);
}

static agentao_status floor_stream(agentao_agent *a, uintptr_t scenario) {
	floor_done = 0;
	agentao_status st = agentao_agent_stream(a, "go", -1, NULL, floor_on_delta, floor_on_done,
	                                         (void *)scenario, NULL);
	if (st != AGENTAO_STATUS_OK) return st;
	pthread_mutex_lock(&floor_mu);
	while (!floor_done) pthread_cond_wait(&floor_cv, &floor_mu);
	pthread_mutex_unlock(&floor_mu);
	return floor_status;
}

static agentao_status floor_chat(agentao_agent *a) {
	char *text = NULL;
	agentao_status st = agentao_agent_chat(a, "go", -1, NULL, &text, NULL);
	agentao_string_free(text);
	return st;
}

static agentao_status floor_reset(agentao_agent *a) { return agentao_agent_set_history(a, "[]", NULL); }
*/
import "C"

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// floorUnits is what the exported callback counts, per scenario.
var floorUnits [5]atomic.Int64

//export goFloorCount
func goFloorCount(scenario C.uintptr_t) {
	floorUnits[scenario].Add(1)
}

type floorWorker struct {
	agents [5]*C.agentao_agent
}

func (w *floorWorker) setup(s int, config string) error {
	c := C.CString(config)
	defer C.free(unsafe.Pointer(c))
	observe := s == event || s == eventJSON
	if st := C.floor_new(c, C.uintptr_t(s), boolInt(s == emit), boolInt(observe), &w.agents[s]); st != C.AGENTAO_STATUS_OK {
		return fmt.Errorf("cgo floor: setup %d: status %d", s, int(st))
	}
	return nil
}

func (w *floorWorker) turn(s int) error {
	var st C.agentao_status
	if s == delta {
		st = C.floor_stream(w.agents[s], C.uintptr_t(s))
	} else {
		st = C.floor_chat(w.agents[s])
		if s == turn {
			floorUnits[s].Add(1)
		}
	}
	if st != C.AGENTAO_STATUS_OK {
		return fmt.Errorf("cgo floor: turn %d: status %d", s, int(st))
	}
	return nil
}

func (w *floorWorker) reset(s int) error {
	if st := C.floor_reset(w.agents[s]); st != C.AGENTAO_STATUS_OK {
		return fmt.Errorf("cgo floor: reset %d: status %d", s, int(st))
	}
	return nil
}

func (w *floorWorker) units(s int) *atomic.Int64 { return &floorUnits[s] }

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
