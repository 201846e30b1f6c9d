package owner

// The fault points of the owner actor (internal/fault): scheduling points where
// another goroutine's interleaving matters. Each costs one atomic load outside
// tests; under an installed injector (harness.Chaos) each yields with the
// injector's probability and counts its hits.
const (
	// PointNoticeDeliver: a job's completion notice reached the owner, before it
	// picks the lane (wake or inject) from busy and its wake budget — racing the
	// turn that sets busy.
	PointNoticeDeliver = "owner.notice.deliver"
	// PointChildNoticeDeliver: a subagent's settlement notice reached the owner,
	// before it picks the verb (followup, steer or inject).
	PointChildNoticeDeliver = "owner.child-notice.deliver"
	// PointRelayDeliver: a relayed message reached the owner, before it calls the
	// surface.
	PointRelayDeliver = "owner.relay.deliver"
)
