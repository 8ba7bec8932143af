package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
	"unsafe"
)

// ShellRequest is one command for a ShellExecutor.
type ShellRequest struct {
	// Command runs as `<interpreter> -c <Command>`.
	Command string
	// Cwd is absolute and inside the workspace; whether it exists is the executor's check.
	Cwd string
	// Env is the environment as NAME=value strings (provider credentials removed).
	Env []string
	// Timeout is the inactivity timeout: stop the command after this long without output
	// and Finish with timedOut.
	Timeout time.Duration
}

// ShellStream is the output stream a chunk comes from.
type ShellStream int32

const (
	Stdout ShellStream = C.AGENTAO_SHELL_STREAM_STDOUT
	Stderr ShellStream = C.AGENTAO_SHELL_STREAM_STDERR
)

// ShellExecutor runs run_shell_command's commands (see SetShellExecutor). Run answers run,
// now or later from any goroutine: any number of Output calls, then Finish, or Fail when the
// command could not start. ctx is cancelled (cause ErrTurnCancelled) when the turn is
// cancelled or the library stops the run (inactivity): stop the command and Finish with
// cancelled (or timedOut). A panic before answering fails the run.
type ShellExecutor interface {
	Run(ctx context.Context, req ShellRequest, run *ShellRun)
}

// BackgroundShellExecutor also starts background commands: RunBackground answers at once
// with Started or Fail. An executor without it refuses background commands.
type BackgroundShellExecutor interface {
	ShellExecutor
	RunBackground(ctx context.Context, req ShellRequest, run *ShellRun)
}

// ShellRun is one run handed to a ShellExecutor. Garbage collected unanswered, it fails.
type ShellRun struct {
	mu   sync.Mutex
	p    *C.agentao_shell_run // nil once answered
	stop func()
}

func (r *ShellRun) take() *C.agentao_shell_run {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.p
	if p != nil {
		r.p = nil
		r.stop()
	}
	return p
}

// Output streams a chunk of the command's output (any bytes).
func (r *ShellRun) Output(stream ShellStream, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil {
		return ErrAnswered
	}
	var cerr *C.agentao_error
	return statusErr(C.agentao_shell_run_output(r.p, C.int32_t(stream), bytesPtr(data), C.size_t(len(data)), &cerr), cerr)
}

// Finish answers a foreground run: the command ended with code (negative: killed by that
// signal), timedOut when stopped for inactivity, cancelled when stopped because ctx was.
func (r *ShellRun) Finish(code int, timedOut, cancelled bool) error {
	return answer(r.take(), func(p *C.agentao_shell_run, e **C.agentao_error) C.agentao_status {
		return C.agentao_shell_run_finish(p, C.int32_t(code), C.bool(timedOut), C.bool(cancelled), e)
	})
}

// Started answers a background run: the command runs as pid in process group pgid
// (negative: none).
func (r *ShellRun) Started(pid, pgid int) error {
	return answer(r.take(), func(p *C.agentao_shell_run, e **C.agentao_error) C.agentao_status {
		return C.agentao_shell_run_started(p, C.int64_t(pid), C.int64_t(pgid), e)
	})
}

// Fail answers that the command could not start ("Error starting command: <message>").
func (r *ShellRun) Fail(message string) error {
	return answerText(r.take(), message, func(p *C.agentao_shell_run, m *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_shell_run_fail(p, m, e)
	})
}

func finalizeShellRun(r *ShellRun) { _ = r.Fail("the host dropped the run without answering it") }

//export goAgentaoShellRun
func goAgentaoShellRun(h C.uintptr_t, req *C.agentao_shell_request, p *C.agentao_shell_run, background C.int) {
	ctx, stop := watchToken(req.cancel)
	r := &ShellRun{p: p, stop: stop}
	defer func() {
		if v := recover(); v != nil {
			_ = r.Fail(panicMessage("ShellExecutor", v))
		}
	}()
	runtime.SetFinalizer(r, finalizeShellRun)
	q := ShellRequest{Command: C.GoString(req.command), Cwd: C.GoString(req.cwd),
		Timeout: time.Duration(req.timeout_ms) * time.Millisecond}
	if req.env_len > 0 {
		for _, e := range unsafe.Slice(req.env, int(req.env_len)) {
			q.Env = append(q.Env, C.GoString(e))
		}
	}
	ex := cgo.Handle(h).Value().(ShellExecutor)
	if background != 0 {
		ex.(BackgroundShellExecutor).RunBackground(ctx, q, r)
		return
	}
	ex.Run(ctx, q, r)
}

// SetShellExecutor runs the agent's shell commands through ex, with interpreter ("": sh);
// nil restores the local executor. The permission decision, the hardline floor and the
// working-directory policy still run first. Right after New or between turns.
func (a *Agent) SetShellExecutor(ex ShellExecutor, interpreter string) error {
	var ci *C.char
	if ex != nil && interpreter != "" {
		var err error
		if ci, err = cstring(interpreter); err != nil {
			return err
		}
		defer freeC(ci)
	}
	bg := C.int(0)
	if _, ok := ex.(BackgroundShellExecutor); ok {
		bg = 1
	}
	return a.setCapability(ex != nil, ex, func(p *C.agentao_agent, h C.uintptr_t, e **C.agentao_error) C.agentao_status {
		return C.agentao_go_set_shell_executor(p, h, ci, bg, e)
	})
}
