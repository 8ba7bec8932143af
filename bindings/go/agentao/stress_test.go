package agentao

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stressTransport answers every request from another goroutine, after a random delay, with a
// random answer; sometimes it answers inside the callback.
type stressTransport struct {
	Broadcaster
	answers chan func()
	events  atomic.Int64
}

func (s *stressTransport) EmitEvent(Event) { s.events.Add(1) }

func (s *stressTransport) later(f func()) {
	if rand.IntN(4) == 0 {
		f()
		return
	}
	s.answers <- f
}

func (s *stressTransport) ConfirmTool(_ ConfirmRequest, r *ConfirmReply) {
	s.later(func() {
		switch rand.IntN(10) {
		case 0:
			_ = r.Fail("stress says no")
		case 1:
			_ = r.Deny()
		default:
			_ = r.Allow()
		}
	})
}

func (s *stressTransport) AskUser(_ Question, r *AnswerReply) { s.later(func() { _ = r.Answer("x") }) }

func (s *stressTransport) OnMaxIterations(_ MaxIterationsRequest, r *MaxIterationsReply) {
	s.later(func() {
		if rand.IntN(3) == 0 {
			_ = r.Continue()
		} else {
			_ = r.Stop()
		}
	})
}

// TestStress runs many goroutines against several agents with random cancels, early stream
// breaks, closes during turns and deferred answers, for AGENTAO_STRESS_SECONDS seconds (the
// test step runs it with GOGC=1 and GODEBUG=cgocheck=1). Every call must end with a result
// or an expected error, and every handle must be released at the end.
func TestStress(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("AGENTAO_STRESS_SECONDS"))
	if secs <= 0 {
		t.Skip("set AGENTAO_STRESS_SECONDS to run the stress test")
	}
	dir := t.TempDir()
	script := `{"repeat":400,"text":"step {i} of the stress run","chunk_size":3,` +
		`"tool_calls":[{"id":"c{i}","name":"write_file","arguments":{"file_path":"f{i}.txt","content":"{i}"}},` +
		`{"id":"h{i}","name":"stress_tool","arguments":{}}]}`
	// With an engine in workspace-write, write_file needs no confirmation; without one it does.
	cfgs := []string{config(dir, script, `"permissions":{"mode":"workspace-write"}`), config(dir, script, "")}

	tr := &stressTransport{answers: make(chan func(), 256)}
	var answerers sync.WaitGroup
	for range 4 {
		answerers.Add(1)
		go func() {
			defer answerers.Done()
			for f := range tr.answers {
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				f()
			}
		}()
	}

	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	var turns, ok, cancelled, busy, other, toolCalls atomic.Int64
	var failures sync.Map
	expected := func(err error) bool {
		return err == nil || errors.Is(err, StatusCancelled) || errors.Is(err, StatusHostError) ||
			errors.Is(err, StatusTurnInProgress) || errors.Is(err, ErrClosed)
	}
	note := func(err error) {
		turns.Add(1)
		switch {
		case err == nil:
			ok.Add(1)
		case errors.Is(err, StatusCancelled):
			cancelled.Add(1)
		case errors.Is(err, StatusTurnInProgress):
			busy.Add(1)
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		default:
			other.Add(1)
		}
		if !expected(err) {
			failures.Store(err.Error(), true)
		}
	}

	var workers sync.WaitGroup
	for w := range 6 { // agents, each shared by 3 goroutines and recreated now and then
		workers.Add(1)
		go func() {
			defer workers.Done()
			for time.Now().Before(deadline) {
				var obs atomic.Int64
				a, err := New(cfgs[w%2], tr, WithHostEventObserver(func(HostEvent) { obs.Add(1) }))
				if err != nil {
					failures.Store("New: "+err.Error(), true)
					return
				}
				// A host tool answered later, sometimes after its turn was cancelled; sometimes it panics.
				if err := a.AddAsyncTool(ToolSpec{Name: "stress_tool", Description: "d"}, func(_ context.Context, call ToolCall, r *ToolReply) {
					toolCalls.Add(1)
					if rand.IntN(10) == 0 {
						panic("stress panic")
					}
					tr.later(func() {
						_ = call.Output("o")
						if rand.IntN(5) == 0 {
							_ = r.Fail("", "stress fail")
						} else {
							_ = r.Result("r")
						}
					})
				}); err != nil {
					failures.Store("AddAsyncTool: "+err.Error(), true)
				}
				life, stop := context.WithTimeout(context.Background(), time.Duration(50+rand.IntN(400))*time.Millisecond)
				var g sync.WaitGroup
				for k := range 3 {
					g.Add(1)
					go func() {
						defer g.Done()
						for life.Err() == nil {
							ctx, cancel := context.WithCancel(life)
							if rand.IntN(3) == 0 {
								time.AfterFunc(time.Duration(rand.IntN(3000))*time.Microsecond, cancel)
							}
							switch (k + rand.IntN(4)) % 4 {
							case 0:
								_, err := a.Chat(ctx, "go", WithMaxIterations(2))
								note(err)
							case 1:
								_, err := a.Run(ctx, "go", WithMaxIterations(3))
								note(err)
							case 2:
								n, limit := 0, rand.IntN(12)
								var last error
								for _, err := range a.Stream(ctx, "go", WithMaxIterations(2)) {
									last = err
									if n++; n > limit {
										break
									}
								}
								note(last)
							case 3:
								if _, err := a.SetPermissionMode([]PermissionMode{ReadOnly, WorkspaceWrite, FullAccess}[rand.IntN(3)]); !expected(err) && !errors.Is(err, StatusNoEngine) {
									failures.Store(fmt.Sprint("mode: ", err), true)
								}
								if _, err := a.History(); !expected(err) {
									failures.Store(fmt.Sprint("history: ", err), true)
								}
							}
							cancel()
						}
					}()
				}
				if w%2 == 0 { // a host-event reader
					g.Add(1)
					go func() {
						defer g.Done()
						hs, err := a.Events(life)
						if err != nil {
							if !expected(err) {
								failures.Store("Events: "+err.Error(), true)
							}
							return
						}
						defer hs.Close()
						for range hs.All() {
						}
					}()
				}
				<-life.Done()
				if rand.IntN(2) == 0 {
					a.Close() // while the goroutines may still be inside a turn
				}
				g.Wait()
				stop()
				a.Close()
			}
		}()
	}
	workers.Wait()
	close(tr.answers)
	answerers.Wait()
	runGC()
	waitHandles(t)
	t.Logf("stress: %d turn calls: %d ok, %d cancelled, %d refused busy, %d other expected (host error, closed); %d events; %d host tool calls",
		turns.Load(), ok.Load(), cancelled.Load(), busy.Load(), other.Load(), tr.events.Load(), toolCalls.Load())
	failures.Range(func(k, _ any) bool {
		t.Errorf("unexpected: %v", k)
		return true
	})
	if ok.Load() == 0 || cancelled.Load() == 0 || other.Load() == 0 || toolCalls.Load() == 0 {
		t.Errorf("the stress run did not exercise ok, cancelled and failed turns and host tool calls")
	}
}
