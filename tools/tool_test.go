package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDecodeArgsIsStrict(t *testing.T) {
	type args struct {
		JobID *string `json:"job_id"`
	}
	for raw, ok := range map[string]bool{
		``:                           true, // empty means {}
		"  \n":                       true,
		`{}`:                         true,
		`{"job_id":"bash-1"}`:        true,
		"{\"job_id\":\"bash-1\"}\n ": true,
		`{"job_id":"bash-1","x":1}`:  false, // unknown field
		`{"job_id":1}`:               false, // wrong type
		`[]`:                         false,
		`{"job_id":"bash-1"}{}`:      false, // trailing value
		`{"job_id":"bash-1"} x`:      false,
		`{"job_id":"bash-1"}}`:       false, // a stray closer (json.Decoder.More misses it)
		`{}]`:                        false,
		`{`:                          false,
	} {
		var a args
		err := DecodeArgs(json.RawMessage(raw), &a)
		if ok {
			require.NoError(t, err, "%q", raw)
		} else {
			require.Error(t, err, "%q", raw)
			require.True(t, strings.HasPrefix(err.Error(), "invalid arguments: "), "%q: %v", raw, err)
		}
	}
	big := `{"job_id":"` + strings.Repeat("x", MaxArgsBytes) + `"}`
	require.EqualError(t, DecodeArgs(json.RawMessage(big), &args{}),
		"invalid arguments: 65549 bytes exceeds the limit of 65536")
}

func TestPipelineRunsFinalStepsOnEveryResult(t *testing.T) {
	tool := Tool{Name: "t", Execute: func(context.Context, Call) Result { panic("boom") }}
	var seen []string
	p := &Pipeline{}
	p.AddPre(func(_ context.Context, c *Call) (*Result, error) {
		c.Caller = Caller{session: "edited"}
		return nil, nil
	})
	p.AddFinal(func(_ context.Context, c Call, r Result) Result {
		text, _ := r.SingleText()
		seen = append(seen, c.Caller.Session()+": "+text)
		return r
	})
	res := p.Run(context.Background(), tool, Call{Name: "t"})
	require.True(t, res.IsError)
	require.Equal(t, []string{"edited: Error: boom"}, seen)
}

func TestPipelineMakesEveryTextBlockValidUTF8(t *testing.T) {
	content := []Block{{Type: "text", Text: "ok 界"}, {Type: "text", Text: "raw \xff\xfe bytes"}, {Type: "reasoning", Text: "\xe7\x95"}}
	tool := Tool{Name: "t", Execute: func(context.Context, Call) Result { return Result{Content: content} }}
	var atFinal []string
	p := &Pipeline{}
	p.AddFinal(func(_ context.Context, _ Call, r Result) Result {
		for _, b := range r.Content {
			atFinal = append(atFinal, b.Text)
		}
		return r
	})
	res := p.Run(context.Background(), tool, Call{Name: "t"})
	want := []string{"ok 界", "raw \uFFFD bytes", "\uFFFD"}
	require.Equal(t, want, atFinal, "the final steps see valid text")
	require.Len(t, res.Content, 3)
	for i, b := range res.Content {
		require.Equal(t, want[i], b.Text)
	}
	require.Equal(t, "raw \xff\xfe bytes", content[1].Text, "the tool's own slice is not written")

	// A panic whose text is not valid UTF-8 is rendered valid too.
	bad := Tool{Name: "b", Execute: func(context.Context, Call) Result { panic("boom \xff") }}
	text, _ := p.Run(context.Background(), bad, Call{Name: "b"}).SingleText()
	require.Equal(t, "Error: boom \uFFFD", text)
}
