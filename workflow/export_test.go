package workflow

// CrashScript makes the run's script actor panic with "injected script crash" at
// its next message (WORKFLOW.md 6.0's script-crash test hook). Test builds only.
func (r *Run) CrashScript() { r.root.Send(r.pid, &crashReq{}) }

// PanicRunActor makes the run actor panic with "injected run crash" (test builds only).
func (r *Run) PanicRunActor() { r.root.Send(r.pid, &runCrashReq{}) }
