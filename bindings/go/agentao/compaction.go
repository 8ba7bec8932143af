package agentao

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"runtime/cgo"
	"unsafe"
)

// Image is an image sent with a message (agentao_image): MIMEType is image/png, image/jpeg,
// image/gif or image/webp, Data the raw bytes. The library checks type, size and count
// before the turn starts (StatusInvalidArgument, nothing sent).
type Image struct {
	MIMEType string
	Data     []byte
}

// WithImages sends images with the turn's message (Chat, Run and Stream). They are copied.
func WithImages(images ...Image) TurnOption {
	return func(o *turnOptions) { o.images = append(o.images, images...) }
}

// cImages is a C copy of a turn's images: no Go pointer is handed to the library.
type cImages struct {
	p *C.agentao_image
	n C.size_t
}

func newCImages(images []Image) cImages {
	if len(images) == 0 {
		return cImages{}
	}
	size := C.size_t(unsafe.Sizeof(C.agentao_image{}))
	p := (*C.agentao_image)(C.calloc(C.size_t(len(images)), size))
	list := unsafe.Slice(p, len(images))
	for i, img := range images {
		list[i].mime_type = C.CString(sanitize(img.MIMEType))
		if len(img.Data) > 0 {
			list[i].data = (*C.uint8_t)(C.CBytes(img.Data))
		}
		list[i].len = C.size_t(len(img.Data))
	}
	return cImages{p: p, n: C.size_t(len(images))}
}

func (c cImages) free() {
	if c.p == nil {
		return
	}
	for _, img := range unsafe.Slice(c.p, int(c.n)) {
		C.free(unsafe.Pointer(img.mime_type))
		C.free(unsafe.Pointer(img.data))
	}
	C.free(unsafe.Pointer(c.p))
}

// ContextUsage is the context estimate of the next request and the window it is measured
// against (agentao_agent_context_usage).
type ContextUsage struct {
	EstimatedTokens     uint64  `json:"estimated_tokens"`
	Window              uint64  `json:"window"`
	ConfiguredWindow    uint64  `json:"configured_window"`
	LearnedWindow       *uint64 `json:"learned_window"`
	MicrocompactAbove   uint64  `json:"microcompact_above"`
	CompactAbove        uint64  `json:"compact_above"`
	Compactions         uint64  `json:"compactions"`
	ConsecutiveFailures uint32  `json:"consecutive_failures"`
	BreakerOpen         bool    `json:"breaker_open"`
}

// ContextUsage returns the context figures; any goroutine, during a turn too.
func (a *Agent) ContextUsage() (*ContextUsage, error) {
	return getDecoded[ContextUsage](a, func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_context_usage(p, o, e)
	})
}

// CompactionResult is how an on-demand compaction ended.
type CompactionResult struct {
	// Status is "success", "cancelled", "failed" or "skipped".
	Status            string  `json:"status"`
	PreMsgs           int     `json:"pre_msgs"`
	PostMsgs          int     `json:"post_msgs"`
	PreTokensHistory  uint64  `json:"pre_tokens_history"`
	PostTokensHistory uint64  `json:"post_tokens_history"`
	DurationMs        uint64  `json:"duration_ms"`
	Detail            *string `json:"detail"`
}

// Compact compacts the history now (between turns; it blocks until done): an LLM summary, or
// the compaction controller's, replaces the older messages. reason ("" means "manual") goes
// into the events. Cancelling ctx cancels the summarizer's call. A compaction that did not
// succeed is not an error: Status says why.
func (a *Agent) Compact(ctx context.Context, reason string) (*CompactionResult, error) {
	var cr *C.char
	if reason != "" {
		var err error
		if cr, err = cstring(reason); err != nil {
			return nil, err
		}
		defer freeC(cr)
	}
	tok := C.agentao_cancel_token_new()
	defer C.agentao_cancel_token_free(tok)
	if ctx.Err() != nil {
		cancelToken(tok, context.Cause(ctx).Error())
	} else if ctx.Done() != nil {
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			cancelToken(tok, context.Cause(ctx).Error())
			close(fired)
		})
		defer func() {
			if !stop() {
				<-fired
			}
		}()
	}
	return getDecoded[CompactionResult](a, func(p *C.agentao_agent, o **C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_agent_compact(p, cr, tok, o, e)
	})
}

// CompactionTrigger is what started a compaction.
type CompactionTrigger int32

const (
	CompactionAuto     CompactionTrigger = C.AGENTAO_COMPACTION_TRIGGER_AUTO
	CompactionOverflow CompactionTrigger = C.AGENTAO_COMPACTION_TRIGGER_OVERFLOW
	CompactionManual   CompactionTrigger = C.AGENTAO_COMPACTION_TRIGGER_MANUAL
)

// CompactionKind is what a compaction does.
type CompactionKind int32

const (
	CompactionFull    CompactionKind = C.AGENTAO_COMPACTION_KIND_FULL
	CompactionMinimal CompactionKind = C.AGENTAO_COMPACTION_KIND_MINIMAL
)

// CompactionRequest is one full compaction a controller is asked about.
type CompactionRequest struct {
	Trigger             CompactionTrigger
	Kind                CompactionKind
	Reason              string
	EstimatedTokens     uint64
	Window              uint64
	MessagesToSummarize int
	MessagesKept        int
	// Messages are the messages the summary replaces (the History format).
	Messages json.RawMessage
	// ChildTaskID is set when a foreground sub-agent compacts.
	ChildTaskID string
}

// CompactionReply answers a compaction controller exactly once, inside the call or later from
// any goroutine. One that becomes unreachable unanswered is failed by its finalizer, which
// cancels the compaction.
type CompactionReply struct{ reply }

// Allow lets the library summarise, as without a controller.
func (r *CompactionReply) Allow() error {
	return answer(r.take(), func(p *C.agentao_reply, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_compaction_allow(p, e)
	})
}

// Cancel refuses the compaction; reason ("" for none) goes into compaction_settled's detail.
func (r *CompactionReply) Cancel(reason string) error {
	if reason == "" {
		return answer(r.take(), func(p *C.agentao_reply, e **C.agentao_error) C.agentao_status {
			return C.agentao_reply_compaction_cancel(p, nil, e)
		})
	}
	return answerText(r.take(), reason, func(p *C.agentao_reply, t *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_compaction_cancel(p, t, e)
	})
}

// Summary answers with the summary itself: no model is called.
func (r *CompactionReply) Summary(text string) error {
	return answerText(r.take(), text, func(p *C.agentao_reply, t *C.char, e **C.agentao_error) C.agentao_status {
		return C.agentao_reply_compaction_summary(p, t, e)
	})
}

// CompactionController decides about each full compaction (automatic, overflow, on demand,
// a sub-agent's) by answering reply. It runs on a library thread; a panic before the reply is
// answered fails it, which cancels the compaction.
type CompactionController func(req CompactionRequest, reply *CompactionReply)

// SetCompactionController installs fn, or with nil removes the controller. Between turns
// only (StatusTurnInProgress).
func (a *Agent) SetCompactionController(fn CompactionController) error {
	return a.setCapability(fn != nil, fn, func(p *C.agentao_agent, h C.uintptr_t, e **C.agentao_error) C.agentao_status {
		return C.agentao_go_set_compaction_controller(p, h, e)
	})
}

//export goAgentaoCompactionDecide
func goAgentaoCompactionDecide(h C.uintptr_t, req *C.agentao_compaction_request, p *C.agentao_reply) {
	serveRequest(p, "compaction controller", func(r *CompactionReply) {
		q := CompactionRequest{
			Trigger:             CompactionTrigger(req.trigger),
			Kind:                CompactionKind(req.kind),
			Reason:              C.GoString(req.reason),
			EstimatedTokens:     uint64(req.estimated_tokens),
			Window:              uint64(req.window),
			MessagesToSummarize: int(req.messages_to_summarize),
			MessagesKept:        int(req.messages_kept),
			Messages:            json.RawMessage(C.GoString(req.messages_json)),
		}
		if req.child_task_id != nil {
			q.ChildTaskID = C.GoString(req.child_task_id)
		}
		cgo.Handle(h).Value().(CompactionController)(q, r)
	})
}
