package registry

import (
	"crypto/rand"
	"crypto/subtle"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
)

// Authority in the registry: the registration rule (mayRegister) and the wire
// credentials (mintSecret, credential, authenticate); see the package doc.

// credentialBytes is the size of a wire credential: 256 random bits.
const credentialBytes = 32

// secret is a wire credential, held by value in the registry's map (no allocation
// of its own per registered agent).
type secret [credentialBytes]byte

// mintSecret returns a fresh wire credential. crypto/rand.Read never fails on the
// platforms Go supports (it panics rather than return short).
func mintSecret() (s secret) {
	_, _ = rand.Read(s[:])
	return s
}

// mayRegister is the registration rule for pid as session s's instance.
func (r *registryActor) mayRegister(s string, pid *actor.PID, replaces *owner.Agent) error {
	old := r.agentPID(s)
	if old == nil || old.Equal(pid) {
		return nil
	}
	if replaces != nil && replaces.Session() == s && old.Equal(replaces.PID()) {
		return nil
	}
	return messages.Errorf(messages.CodeAgentRegistered,
		"agent %q already has a live registered instance; dispose it first, or replace it with its handle (Jobs.ReplaceAgent)", s)
}

// credential answers WireCredential: the secret of a, if a is its session's
// registered instance.
func (r *registryActor) credential(a *owner.Agent) credentialRes {
	rec := r.agents[a.Session()]
	if rec.pid == nil || !rec.pid.Equal(a.PID()) {
		return credentialRes{err: messages.Errorf(messages.CodeOwnerNotLive,
			"agent %q is not the registered agent instance: it has no wire credential", a.Session())}
	}
	return credentialRes{secret: append([]byte(nil), rec.secret[:]...)}
}

// authenticate returns the session a wire request speaks for: "" (no agent) when it
// names none, else the named session if cred is that session's current credential.
func (r *registryActor) authenticate(session string, cred []byte) (string, error) {
	if session == "" {
		return "", nil
	}
	if rec, ok := r.agents[session]; ok && subtle.ConstantTimeCompare(rec.secret[:], cred) == 1 {
		return session, nil
	}
	return "", &messages.Error{Code: messages.CodeUnauthenticated,
		Message: "request for session " + quote(session) + " is not authenticated: it carries no credential of that session's registered agent instance",
		Details: map[string]string{"sessionId": bounded(session)}}
}

// maxShownSession bounds how much of a wire-asserted session an error repeats.
const maxShownSession = 64

// bounded is s cut to maxShownSession bytes on a rune boundary, as valid UTF-8.
func bounded(s string) string {
	if len(s) > maxShownSession {
		cut := maxShownSession
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.ToValidUTF8(s, "\ufffd")
}

// quote renders a wire-asserted session for an error message: bounded, quoted.
func quote(s string) string { return strconv.Quote(bounded(s)) }
