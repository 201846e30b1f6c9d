package cluster

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"

	"github.com/troupe-rt/troupe/session"
)

// Credential is a parent's authority over one cluster child: the parent's
// session and a secret minted by the parent's member when it starts the child
// (Node.Start). The child's descriptor in the store keeps only the secret's
// SHA-256; every Followup and Interrupt carries the secret, and the child's
// member compares its hash with the stored one in constant time. The cluster's
// shared secret (Guard) authenticates members; a Credential authenticates the
// parent: a guarded member that merely says sender=P is refused
// (CodeUnauthorized) and no turn runs.
//
// Whoever holds the parent's authority holds its Credentials (the embedder, in
// memory, beside the parent agent); a Credential is not recoverable from the
// store.
type Credential struct {
	Parent string `json:"parent"`
	Secret string `json:"secret"` // hex, 32 random bytes
}

// credentialBytes is the secret's length.
const credentialBytes = 32

func mintCredential(parent string) (Credential, []byte) {
	var b [credentialBytes]byte
	_, _ = rand.Read(b[:])
	sum := sha256.Sum256(b[:])
	return Credential{Parent: parent, Secret: hex.EncodeToString(b[:])}, sum[:]
}

func (c Credential) raw() []byte {
	b, err := hex.DecodeString(c.Secret)
	if err != nil || len(b) != credentialBytes {
		return nil
	}
	return b
}

// descriptor is a cluster child's descriptor entry (the first log entry, written
// in the same Create as the header): who its parent is and how to reach it, and
// the hash of its parent's credential.
type descriptor struct {
	Label      string `json:"label,omitempty"`
	Provider   string `json:"provider"`
	ParentNode string `json:"parentNode,omitempty"` // a top-level parent's member (host:port)
	Credential string `json:"credentialSha256"`     // hex SHA-256 of the parent's secret
}

func readDescriptor(log []session.Entry) descriptor {
	for _, e := range log {
		if e.Kind == session.EntryDescriptor {
			var d descriptor
			_ = json.Unmarshal(e.Descriptor, &d) // a malformed one has no credential: nothing is authorised
			return d
		}
	}
	return descriptor{}
}

// credentialMatches compares presented with the stored hash in constant time
// (in the hash's length, which is fixed); an empty stored hash matches nothing.
func credentialMatches(storedHex string, presented []byte) bool {
	stored, err := hex.DecodeString(storedHex)
	if err != nil || len(stored) != sha256.Size || len(presented) != credentialBytes {
		return false
	}
	sum := sha256.Sum256(presented)
	return subtle.ConstantTimeCompare(stored, sum[:]) == 1
}
