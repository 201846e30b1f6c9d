package jobtools

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/internal/deliver"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
	"github.com/troupe-rt/troupe/tools"
)

// ControllerName is the job controller a mount attaches (SPEC §3).
const ControllerName = "tool-jobs"

// Mount is the job tools mounted in a Scope: it attaches the `tool-jobs` controller,
// which arms Start for owners composed under the scope (SPEC §2.10), and the
// completion-notice listener of SPEC §3.8 in the scope's layer. Disposing it (or its
// scope) disarms both.
type Mount struct {
	*Tools
	scope   *scope.Scope
	effects []*scope.Effect
}

// MountIn validates cfg (SPEC §3.1's load-time errors) and mounts the tools of the
// job registry jobs (troupe.System.Jobs()) in sc.
func MountIn(ctx context.Context, jobs *registry.Client, sc *scope.Scope, cfg Config) (*Mount, error) {
	t, err := New(jobs, cfg)
	if err != nil {
		return nil, err
	}
	m := &Mount{Tools: t, scope: sc}
	ctl, err := jobs.AttachController(ctx, sc, ControllerName)
	if err != nil {
		return nil, err
	}
	m.effects = append(m.effects, ctl)
	lis, err := jobs.OnJobDone(ctx, sc, t.notifier(jobs.Root()))
	if err != nil {
		_ = ctl.Run(context.Background())
		return nil, err
	}
	m.effects = append(m.effects, lis)
	return m, nil
}

// Dispose detaches the controller and the notice listener. Idempotent.
func (m *Mount) Dispose(ctx context.Context) error {
	var errs []error
	for _, e := range m.effects {
		errs = append(errs, e.Run(ctx))
	}
	return errors.Join(errs...)
}

// Pipeline returns a tool pipeline with the mount's limit capture first and its
// finalize step last; add policy hooks between.
func (m *Mount) Pipeline() *tools.Pipeline {
	p := &tools.Pipeline{}
	p.PrependPre(m.CaptureLimit)
	p.AddFinal(m.Finalize)
	return p
}

// PromptSection returns the system-prompt section (SPEC §3.10): its name and text.
func (m *Mount) PromptSection() (name, text string) { return PromptSection, PromptText }

var noticeSeq atomic.Uint64

// notifier is the onJobDone listener: it suppresses claimed and unowned jobs and
// sends the notice to the exact owner incarnation captured at start, whose actor
// picks the lane. It runs on the registry actor and only sends.
func (t *Tools) notifier(root *actor.RootContext) registry.JobDoneFunc {
	return func(snap *messages.JobSnapshot, who registry.Owner) {
		if snap.Reported || who.PID == nil {
			return
		}
		limit := 0
		if snap.OutputLimitBytes != nil {
			limit = int(*snap.OutputLimitBytes)
		}
		root.Send(who.PID, &deliver.Notice{
			JobID: snap.Id,
			Message: owner.Message{
				ID:   noticeID(snap.Id),
				Role: "user",
				Text: BoundNotice(snap, limit),
				Source: owner.Source{Kind: "plugin", Plugin: ControllerName, Form: "notice",
					Summary: Summary(snap)},
			},
			Delivery: string(t.cfg.CompletionDelivery),
			MaxWakes: t.cfg.MaxConsecutiveWakes,
		})
	}
}

// noticeID is a notice's message id, "notice-<job id>-<seq>", in one allocation.
func noticeID(job string) string {
	var seq [20]byte
	return "notice-" + job + "-" + string(strconv.AppendUint(seq[:0], noticeSeq.Add(1), 10))
}
