package controller

import (
	"github.com/troupe-rt/troupe/actors/registry"
	"github.com/troupe-rt/troupe/internal/userauth"
)

// forUser is the controller's authority over session: it acts for the human user
// (SPEC §4), who sees what that session sees. Only troupe's own code can mint it
// (internal/userauth); the session comes from the user's request frame.
func forUser(session string) registry.Caller {
	return userauth.ForSession(session).(registry.Caller)
}
