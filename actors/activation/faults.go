package activation

// The fault points of the continuation directory and of its Activations
// (internal/fault): scheduling points where another goroutine's interleaving
// matters. Each costs one atomic load outside tests; under an installed injector
// (harness.Chaos) each yields with the injector's probability and counts its hits.
const (
	// PointDirectoryRoute: a followup found its child resident and is about to be
	// routed to that Activation — which may be proposing to settle meanwhile.
	PointDirectoryRoute = "directory.followup.route"
	// PointDirectoryMaterialize: a cold resume (or a start) took the session's new
	// epoch from the store and is about to spawn its Activation.
	PointDirectoryMaterialize = "directory.materialize.after-activate"
	// PointDirectorySettle: an Activation proposed to settle; the directory is about
	// to close admission and ask it to dispose — racing followups on their way.
	PointDirectorySettle = "directory.settle.close-admission"
	// PointDirectoryRelease: a disposed Activation's release, before it leaves the
	// directory and the operations waiting on it run again.
	PointDirectoryRelease = "directory.release"
	// PointActivationAccept: a message is durable in the inbox journal; its sender
	// is not answered yet.
	PointActivationAccept = "activation.accept.after-write"
	// PointActivationRecordedCrash: a fault point (fault.Point): the Activation
	// of a cold restore has answered its followup, whose turn start the restore's
	// commit recorded, and has not run that turn yet; firing, it panics there.
	PointActivationRecordedCrash = "activation.recorded.crash"
	// PointActivationTurnStart: a turn's start is logged; its goroutine is not
	// started yet.
	PointActivationTurnStart = "activation.turn.start"
	// PointActivationTurnEnd: a turn's goroutine has returned; its end is not
	// logged yet.
	PointActivationTurnEnd = "activation.turn.end"
	// PointActivationDispose: the directory asked the Activation to dispose; it is
	// about to confirm or refuse (it may have taken work since it proposed).
	PointActivationDispose = "activation.dispose.decide"
)
