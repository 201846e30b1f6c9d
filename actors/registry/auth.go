package registry

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"hash"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-rt/troupe/actors/owner"
	"github.com/troupe-rt/troupe/messages"
)

// Authority in the registry: the registration rule (mayRegister) and the wire
// credentials (credentials, credential, authenticate); see the package doc.

// credentials derives the wire credentials (docs/THREAT-MODEL.md): a registration's
// is HMAC-SHA-256, under the registry's own random 256-bit key, of the
// registration's number and its session. A number is never reused, so every
// registration has a fresh credential, and one stops authenticating when its
// registration leaves the agent registry; the registry keeps the number (8 B per
// registered agent), not the credential (32 B). It is the registry actor's own.
type credentials struct {
	mac  hash.Hash // keyed by newCredentials
	last uint64    // the last registration number given
	buf  []byte    // the HMAC's input, then its output: reused, no allocation per use
}

// newCredentials keys a registry's credentials. crypto/rand.Read never fails on
// the platforms Go supports (it panics rather than return short).
func newCredentials() credentials {
	var key [sha256.Size]byte
	_, _ = rand.Read(key[:])
	return credentials{mac: hmac.New(sha256.New, key[:])}
}

// next returns a fresh registration number.
func (k *credentials) next() uint64 {
	k.last++
	return k.last
}

// of returns the credential of registration reg of session: 32 B, valid until the
// next call (copy it to keep it).
func (k *credentials) of(session string, reg uint64) []byte {
	k.buf = append(binary.BigEndian.AppendUint64(k.buf[:0], reg), session...)
	k.mac.Reset()
	k.mac.Write(k.buf)
	k.buf = k.mac.Sum(k.buf[:0])
	return k.buf
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
	return credentialRes{secret: append([]byte(nil), r.creds.of(a.Session(), rec.reg)...)}
}

// authenticate returns the session a wire request speaks for: "" (no agent) when it
// names none, else the named session if cred is that session's current credential.
func (r *registryActor) authenticate(session string, cred []byte) (string, error) {
	if session == "" {
		return "", nil
	}
	if rec, ok := r.agents[session]; ok && subtle.ConstantTimeCompare(r.creds.of(session, rec.reg), cred) == 1 {
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
