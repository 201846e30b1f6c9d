package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/troupe-rt/troupe/cluster/wire"
)

func TestCredentialMatchesOnlyItsOwnSecret(t *testing.T) {
	cred, sum := mintCredential("p")
	require.Equal(t, "p", cred.Parent)
	stored := hex.EncodeToString(sum)
	require.True(t, credentialMatches(stored, cred.raw()))
	other, _ := mintCredential("p")
	require.False(t, credentialMatches(stored, other.raw()), "another child's credential")
	require.False(t, credentialMatches(stored, nil), "no credential")
	require.False(t, credentialMatches(stored, cred.raw()[:credentialBytes-1]), "a short one")
	require.False(t, credentialMatches("", cred.raw()), "a child without a stored hash authorises nothing")
	require.False(t, credentialMatches("zz"+stored[2:], cred.raw()), "a malformed stored hash")
	require.False(t, credentialMatches(hex.EncodeToString(sum[:16]), cred.raw()), "a short stored hash")
	require.Nil(t, Credential{Secret: "not hex"}.raw())
	require.Nil(t, Credential{Secret: "abcd"}.raw(), "a secret of the wrong length")
}

func TestDerivedCredentialsAreKeyedPerChild(t *testing.T) {
	k1, k2 := make([]byte, credentialBytes), make([]byte, credentialBytes)
	k2[0] = 1
	a := credentialFor(k1, "c1")
	require.Len(t, a, credentialBytes)
	require.Equal(t, a, credentialFor(k1, "c1"), "the same parent key and child give the same credential")
	require.NotEqual(t, a, credentialFor(k1, "c2"), "another child")
	require.NotEqual(t, a, credentialFor(k2, "c1"), "another parent's key")
	sum := sha256.Sum256(a)
	require.True(t, credentialMatches(hex.EncodeToString(sum[:]), a))
}

func TestNoticeTextIsBoundedValidUTF8(t *testing.T) {
	require.Equal(t, "S\nIt left no closing message.", noticeText("S", ""))
	require.Equal(t, "S\nIts closing message:\nbye", noticeText("S", "bye"))
	long := noticeText("S", strings.Repeat("é", MaxContent))
	require.LessOrEqual(t, len(long), MaxContent)
	require.True(t, utf8.ValidString(long))
}

func TestValidNoticeRefusesBadInput(t *testing.T) {
	ok := &wire.Notice{ParentSession: "p", ChildSession: "c", NoticeId: "n1", Content: "x"}
	require.Nil(t, validNotice(ok))
	for name, n := range map[string]*wire.Notice{
		"no parent":          {ChildSession: "c", NoticeId: "n1"},
		"no child":           {ParentSession: "p", NoticeId: "n1"},
		"no id":              {ParentSession: "p", ChildSession: "c"},
		"invalid UTF-8":      {ParentSession: "p", ChildSession: "c", NoticeId: "n1", Content: "\xff"},
		"oversized content":  {ParentSession: "p", ChildSession: "c", NoticeId: "n1", Content: strings.Repeat("x", MaxContent+1)},
		"oversized message":  {ParentSession: "p", ChildSession: "c", NoticeId: "n1", Message: make([]byte, maxNoticeMessage+1)},
		"long parent id":     {ParentSession: strings.Repeat("p", 257), ChildSession: "c", NoticeId: "n1"},
		"invalid stop":       {ParentSession: "p", ChildSession: "c", NoticeId: "n1", StopReason: "\xff"},
		"oversized stop":     {ParentSession: "p", ChildSession: "c", NoticeId: "n1", StopReason: strings.Repeat("s", 65)},
		"invalid summary":    {ParentSession: "p", ChildSession: "c", NoticeId: "n1", Summary: "\xfe"},
		"invalid child utf8": {ParentSession: "p", ChildSession: "\xff", NoticeId: "n1"},
	} {
		ack := validNotice(n)
		require.NotNil(t, ack, name)
		require.Equal(t, string(CodeInvalid), ack.Code, name)
	}
}
