package registry

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/internal/fault"
	"github.com/troupe-rt/troupe/internal/mailbox"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/scope"
)

// The registry's shell of a start (SPEC §2.2): the preflight in order, the
// producer's Run, and the registration commit; the admission core is admission.go.

const maxSafeInteger = 1<<53 - 1

// start runs SPEC §2.2's preflight in order, then Run, then the registration commit.
// startReq answers a start request, also when the registry fails on it: the panic
// goes on to the guardian (which resumes the registry) after the caller is told.
func (r *registryActor) startReq(c actor.Context, m *startReq) {
	answered := false
	defer func() {
		if !answered {
			m.reply <- startRes{err: messages.Errorf(messages.CodeRegistryFailed,
				"the job registry failed while starting the job; nothing was started (the registry goes on)")}
		}
	}()
	id, err := r.start(c, m.spec, m.handoff)
	answered = true
	m.reply <- startRes{id: id, err: err, free: true}
}

func (r *registryActor) start(c actor.Context, spec job.Spec, h *mailbox.Handoff) (string, error) {
	if r.refusing {
		return "", &messages.Error{Code: messages.CodeStopped, Message: TextShuttingDown}
	}
	if r.disposing != nil || r.disposed {
		return "", errDisposed()
	}
	var chain []scope.ID
	if spec.Owner != nil {
		chain = spec.Owner.Scope().Chain()
	}
	if !r.serves(chain) {
		return "", &messages.Error{Code: messages.CodeNoController, Message: TextNoController}
	}
	if spec.Kind == "" {
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job kind: expected a non-empty string")
	}
	if !job.ValidKind(spec.Kind) {
		// Step 2 goes on: a kind is also the id prefix and the job actor's name, so
		// one with '/', spaces or a newline would break ids, actor paths and job_list rows.
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job kind: expected a short identifier matching %s, got %s",
			job.KindPattern, job.QuoteBounded(spec.Kind, 2*job.MaxKindBytes))
	}
	if spec.Label == "" {
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job label: expected a non-empty string")
	}
	spec.Label = job.CleanLabel(spec.Label) // one line, valid UTF-8, cut at MaxLabelBytes
	if l := spec.OutputLimitBytes; l != nil && (*l < 1 || *l > maxSafeInteger) {
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid outputLimitBytes: expected a positive safe integer, got %d", *l)
	}
	if spec.Run == nil {
		return "", messages.Errorf(messages.CodeInvalidSpec, "invalid job run: expected a function")
	}
	var oe *ownerEntry
	if a := spec.Owner; a != nil {
		if r.agentMounts == 0 {
			return "", &messages.Error{Code: messages.CodeNoAgentRegistry, Message: TextNoAgentRegistry}
		}
		// Formatted only when raised: an owned start that succeeds pays nothing for it.
		notLive := func() error {
			return messages.Errorf(messages.CodeOwnerNotLive,
				"agent %q is not the registered agent instance (background job owner must be live)", a.Session())
		}
		if p := r.agentPID(a.Session()); p == nil || !p.Equal(a.PID()) {
			return "", notLive()
		}
		oe = r.owners[a.PID().Id]
		if oe != nil && oe.tornDown {
			return "", notLive()
		}
		if oe == nil {
			// The entry exists only with its cleanup effect in the owner's scope: a
			// scope whose disposal has begun refuses it, and nothing is kept.
			key := a.PID().Id
			eff, err := a.Scope().Add(OwnerCleanupLabel, func(ctx context.Context) error {
				return r.client.teardownOwner(ctx, key)
			})
			if err != nil {
				return "", notLive()
			}
			oe = &ownerEntry{key: key, pid: a.PID(), session: a.Session(), chain: chain, cleanup: eff}
			r.owners[key] = oe
		}
	}
	key := ""
	if oe != nil {
		key = oe.key
	}
	if r.adm.Full(key) {
		return "", messages.Errorf(messages.CodeCapacity,
			"background job limit reached for this owner (limit: %d); use job_kill to stop an unneeded job, wait for it to finish, then retry", r.adm.Limit())
	}
	var hooks job.Hooks
	if err := job.Protect(func() (e error) { hooks, e = spec.Run(); return }); err != nil {
		return "", &messages.Error{Code: messages.CodeRunFailed, Message: job.ErrorText(err), Cause: err}
	}
	if err := checkHooks(hooks); err != nil {
		return "", err
	}
	id := r.adm.NextID(spec.Kind)
	r.adm.Take(key)
	// From here to the commit a panic (a bug; PointStartCrash in tests) must leave
	// nothing half-registered: the slot is freed, the producer cancelled and its
	// actor stopped; the id stays used (ids are never reused). The registry's
	// guardian resumes it, and Receive answers the caller.
	var pid *actor.PID
	committed := false
	defer func() {
		if committed {
			return
		}
		r.adm.Release(key)
		if pid != nil {
			c.Stop(pid)
		}
		_ = job.Protect(func() error { return hooks.Cancel(ReasonRegistryFailed) })
	}()
	if fault.Point(PointStartCrash) {
		panic("jobs: planted crash in the middle of admission (" + PointStartCrash + ")")
	}
	rec := &record{
		Meta: job.Meta{
			ID: id, Label: spec.Label, OutputLimitBytes: spec.OutputLimitBytes,
			StartedAt: r.cfg.Now(),
		},
		owner:  oe,
		status: job.Running,
		flags:  flagSlot,
		out:    spec.Record,
		// Live reads call it here until a kill or teardown goes to the job (toHooks).
		readOutput: hooks.ReadOutput,
	}
	rec.flags.set(flagStream, hooks.ReadOutput != nil)
	// A final-output kind's reads call no producer hook; a stream kind's call
	// ReadOutput, which a caller whose ctx can end may run only if declared.
	rec.flags.set(flagReadInline, hooks.ReadOutput == nil || hooks.ReadNonBlocking)
	if rec.readOutput == nil {
		rec.readOutput = liveFinalOutput
	}
	if oe != nil {
		rec.OwnerSession = &oe.session // shared: an owner's session never changes
	}
	if rec.out != nil {
		rec.out.Bind(id, r.cfg.Logger)
	}
	if r.shared == nil {
		r.shared = &job.Shared{Registry: c.Self(), Watcher: r.cfg.Watcher, Logger: r.cfg.Logger, Now: r.cfg.Now,
			SettleTimeout: r.cfg.SettleTimeout, AfterFunc: r.cfg.AfterFunc, Runners: r.runners, Root: c.ActorSystem().Root,
			CallerRuns: r.cfg.CallerRuns}
	}
	// With h, the job actor's Started is left for the start's caller (Client.Start):
	// an OnSettle producer's only, which that run subscribes, so that the actor is
	// idle when Start returns and a settle or a kill then runs on its sender. A Done
	// channel's Started gains nothing from it (an outcome found ready is a worker's
	// run anyway, else the channel's watcher's delivery is): it is the dispatcher's,
	// which runs it while the caller finishes (BenchmarkLifecycleOwned was slower
	// with the caller running it first).
	if hooks.OnSettle == nil {
		h = nil
	}
	pid, err := r.spawner.Spawn(c, &job.Config{Meta: &rec.Meta, Hooks: hooks, Shared: r.shared}, id, h)
	if err != nil {
		// Ids are never reused by one registry, so the name is free; this is a bug.
		panic(fmt.Sprintf("jobs: spawning job actor %s: %v", id, err))
	}
	rec.pid = pid
	r.idx.add(rec)
	committed = true
	r.jobSpawned(c, rec)
	r.fireChanged(oe)
	return id, nil
}

// PointStartCrash is the fault point where the registry panics in the middle of an
// admission: after the id and the slot are taken and the producer runs, before the
// job is registered (TESTING.md's "registry restart mid-admission").
const PointStartCrash = "registry.start.crash"

// ReasonRegistryFailed is the cancel reason of a producer whose start the registry
// failed to complete.
const ReasonRegistryFailed = "job registry failed"

// Texts whose verbatim prefix SPEC pins (§1.3 rule 23); the hint names troupe's API.
const (
	TextNoController    = "background jobs unavailable: no job controller serves this agent (attach a controller in the agent's scope: mount troupe's job tools there, or call Jobs.AttachController)"
	TextNoAgentRegistry = "background job ownership requires the agent registry (mount it with Jobs.MountAgents)"
	// TextShuttingDown refuses a Start made after Shutdown began.
	TextShuttingDown = "troupe system is shutting down: no new jobs are admitted"
	// OwnerCleanupLabel is the label of the owner-disposal effect in an owner's scope.
	OwnerCleanupLabel = "jobs.ownerCleanup()"
)

// checkHooks refuses hooks a job cannot run with: no Cancel, or not exactly one of
// Done and OnSettle. A Cancel it has is called (the producer may hold resources).
func checkHooks(hooks job.Hooks) error {
	hasDone, hasCallback := hooks.Done != nil, hooks.OnSettle != nil
	if hooks.Cancel != nil && hasDone != hasCallback {
		return nil
	}
	if hooks.Cancel != nil {
		_ = job.Protect(func() error { return hooks.Cancel("invalid job hooks") })
	}
	switch {
	case hooks.Cancel == nil:
		return messages.Errorf(messages.CodeInvalidSpec, "invalid job hooks: Cancel is nil (a producer must return Cancel and Done)")
	case hasDone:
		return messages.Errorf(messages.CodeInvalidSpec, "invalid job hooks: both Done and OnSettle are set (a producer settles through one of them)")
	default:
		return messages.Errorf(messages.CodeInvalidSpec, "invalid job hooks: Done is nil (a producer must return Cancel and Done, or OnSettle in place of Done)")
	}
}
