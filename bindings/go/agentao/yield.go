package agentao

import (
	"runtime"
	"sync/atomic"
	"time"
)

// sysmonYield lets a goroutine that runs turn after turn pass through the Go scheduler now and
// then. A turn is one blocking cgo call, and a goroutine that does nothing but such calls is
// never rescheduled: its P's scheduling tick stands still, so after 10 ms the runtime's monitor
// thread (sysmon) takes it for a goroutine running too long, takes its P away inside the call
// at every tick (waking another thread to look for work) and keeps polling every 20 µs instead
// of backing off to 10 ms. Pinned to one CPU that cost a Chat turn ~1.5 µs of CPU in a long
// run of turns (docs/performance.md, "Bindings"). One runtime.Gosched moves the tick; it is
// spent only on a run of turns back to back (a gap between two turns means the goroutine did
// something else, blocking most likely, which went through the scheduler already), once every
// yieldEvery of such a run: a yield costs more than a turn's share of the problem on a short run,
// and a thread hand-over on a goroutine locked to its thread.
type sysmonYield struct {
	runStart atomic.Int64 // monotonic ns (since clockBase): the start of the run, or its last yield
	lastEnd  atomic.Int64 // the end of the last turn
}

const (
	// yieldEvery is half of sysmon's 10 ms, so that the tick moves in every 10 ms of a run.
	yieldEvery = 5 * time.Millisecond
	// runGap is the longest gap between two turns of one run.
	runGap = 50 * time.Microsecond
)

var clockBase = time.Now()

// turnEnded is called at the end of each turn; it yields once a run of turns is yieldEvery long.
func (y *sysmonYield) turnEnded() { y.turnEndedAt(int64(time.Since(clockBase))) }

// turnEndedAt is turnEnded at a given time (ns since clockBase).
func (y *sysmonYield) turnEndedAt(now int64) {
	if now-y.lastEnd.Swap(now) > int64(runGap) {
		y.runStart.Store(now)
		return
	}
	start := y.runStart.Load()
	if now-start < int64(yieldEvery) || !y.runStart.CompareAndSwap(start, now) {
		return
	}
	gosched()
}

// gosched is runtime.Gosched (a variable for the tests).
var gosched = runtimeGosched

var runtimeGosched = runtime.Gosched
