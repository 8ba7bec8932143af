// The Go worker of `bench --only bindings` (bench/bench_bindings.c describes the protocol and
// the scenarios): the same workloads as the C worker, through the public Go API as a host
// writes them; with --cgo-floor, through cgo with no binding (floor.go).
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/agentao/libagentao/bindings/go/agentao"
)

const (
	delta = iota
	emit
	event // the typed observer
	turn
	eventJSON // the JSON observer
)

var scenarios = map[string]int{"delta": delta, "emit": emit, "event": event, "turn": turn, "event-json": eventJSON}

// processCPU is CLOCK_PROCESS_CPUTIME_ID: every thread's CPU time, the library's and the Go
// runtime's included, as the C worker reads it.
func processCPU() time.Duration {
	var ts syscall.Timespec
	const clockProcessCPUTimeID = 2
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}

// countingTransport is a host transport whose EmitEvent only counts the deltas' events.
type countingTransport struct {
	agentao.NullTransport
	n *atomic.Int64
}

func (t countingTransport) EmitEvent(ev agentao.Event) {
	if ev.Type == "llm_text" {
		t.n.Add(1)
	}
}

// workload is one worker's way of running the scenarios.
type workload interface {
	setup(s int, config string) error
	turn(s int) error
	// reset clears the scenario agent's history between turns (outside the timing).
	reset(s int) error
	units(s int) *atomic.Int64
}

type worker struct {
	ctx    context.Context
	agents [5]*agentao.Agent
	count  [5]atomic.Int64
}

func (w *worker) units(s int) *atomic.Int64 { return &w.count[s] }

func (w *worker) reset(s int) error { return w.agents[s].SetHistory("[]") }

func (w *worker) setup(s int, config string) error {
	var tr agentao.Transport
	if s == emit {
		tr = countingTransport{n: &w.count[s]}
	}
	a, err := agentao.New(config, tr)
	if err != nil {
		return err
	}
	w.agents[s] = a
	if s == event {
		n := &w.count[s]
		_, err = a.AddHostEventObserver(func(agentao.HostEvent) { n.Add(1) })
	}
	if s == eventJSON {
		n := &w.count[s]
		_, err = a.AddHostEventJSONObserver(func([]byte) { n.Add(1) })
	}
	return err
}

func (w *worker) turn(s int) error {
	a := w.agents[s]
	if s == delta {
		for c, err := range a.Stream(w.ctx, "go") {
			if err != nil {
				return err
			}
			if c.Outcome == nil {
				w.count[s].Add(1)
			}
		}
		return nil
	}
	if _, err := a.Chat(w.ctx, "go"); err != nil {
		return err
	}
	if s == turn {
		w.count[s].Add(1)
	}
	return nil
}

func main() {
	// A cancellable context, as a host's usually is (Background would skip the binding's
	// context link).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var w workload = &worker{ctx: ctx}
	if len(os.Args) > 1 && os.Args[1] == "--cgo-floor" {
		w = &floorWorker{}
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
		if len(f) != 3 {
			fail(fmt.Errorf("bad command %q", line))
		}
		s, ok := scenarios[f[1]]
		if !ok {
			fail(fmt.Errorf("unknown scenario %q", f[1]))
		}
		if f[0] == "setup" {
			if err := w.setup(s, f[2]); err != nil {
				fail(err)
			}
			fmt.Println("ok")
			continue
		}
		if f[0] != "run" {
			fail(fmt.Errorf("the Go worker does not run %q", f[0]))
		}
		turns, _ := strconv.Atoi(f[2])
		w.units(s).Store(0)
		var cpu, wall time.Duration
		for range turns {
			c0, t0 := processCPU(), time.Now()
			if err := w.turn(s); err != nil {
				fail(err)
			}
			cpu += processCPU() - c0
			wall += time.Since(t0)
			if err := w.reset(s); err != nil {
				fail(err)
			}
		}
		fmt.Printf("%d %d %d\n", cpu.Nanoseconds(), wall.Nanoseconds(), w.units(s).Load())
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bind-go:", err)
	os.Exit(1)
}
