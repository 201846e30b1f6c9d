package tools

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Pre runs before a tool executes. A non-nil Result short-circuits the call (a
// denial or a replacement); an error becomes an errored result. It may edit call.
type Pre func(ctx context.Context, call *Call) (*Result, error)

// Around wraps execution; it calls next to proceed.
type Around func(ctx context.Context, call Call, next func(context.Context, Call) Result) Result

// Post sees the result and may replace it.
type Post func(ctx context.Context, call Call, res Result) Result

// Final runs last on every result, whatever produced it.
type Final func(ctx context.Context, call Call, res Result) Result

// Pipeline holds the hooks, in the order they run. Build it before use; it is then
// read-only and safe for concurrent Runs.
type Pipeline struct {
	pre    []Pre
	around []Around
	post   []Post
	final  []Final
}

// AddPre appends a pre hook; PrependPre puts one first (to observe before policy).
func (p *Pipeline) AddPre(h Pre)     { p.pre = append(p.pre, h) }
func (p *Pipeline) PrependPre(h Pre) { p.pre = append([]Pre{h}, p.pre...) }

// AddAround adds a wrapper; the first added is the outermost.
func (p *Pipeline) AddAround(h Around) { p.around = append(p.around, h) }

// AddPost appends a post hook.
func (p *Pipeline) AddPost(h Post) { p.post = append(p.post, h) }

// AddFinal appends a final step.
func (p *Pipeline) AddFinal(h Final) { p.final = append(p.final, h) }

// Run executes tool for call through the hooks. It never panics. Every text block
// of the result is valid UTF-8 before the final steps run (invalid sequences become
// U+FFFD), whatever tool or hook produced it, so the model never sees raw bytes.
func (p *Pipeline) Run(ctx context.Context, tool Tool, call Call) Result {
	res := validBlocks(p.run(ctx, tool, &call))
	for _, f := range p.final {
		res = guard(func() Result { return f(ctx, call, res) }, res)
	}
	return res
}

func (p *Pipeline) run(ctx context.Context, tool Tool, call *Call) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			res = ErrorResult(fmt.Errorf("%v", v))
		}
	}()
	for _, h := range p.pre {
		short, err := h(ctx, call)
		if err != nil {
			return ErrorResult(err)
		}
		if short != nil {
			return *short
		}
	}
	exec := func(ctx context.Context, c Call) Result { return tool.Execute(ctx, c) }
	for i := len(p.around) - 1; i >= 0; i-- {
		h, next := p.around[i], exec
		exec = func(ctx context.Context, c Call) Result { return h(ctx, c, next) }
	}
	res = exec(ctx, *call)
	for _, h := range p.post {
		res = h(ctx, *call, res)
	}
	return res
}

// guard runs f; a panic leaves the result as it was, errored with the panic text.
func guard(f func() Result, prev Result) (res Result) {
	defer func() {
		if v := recover(); v != nil {
			res = ErrorResult(fmt.Errorf("%v", v))
			_ = prev
		}
	}()
	return f()
}

// validBlocks replaces invalid UTF-8 in res's blocks, copying the content only when
// a block needs it.
func validBlocks(res Result) Result {
	for i, b := range res.Content {
		if utf8.ValidString(b.Text) {
			continue
		}
		content := append([]Block(nil), res.Content...)
		for j := i; j < len(content); j++ {
			content[j].Text = strings.ToValidUTF8(content[j].Text, "\uFFFD")
		}
		res.Content = content
		return res
	}
	return res
}
