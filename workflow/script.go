package workflow

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dop251/goja"

	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/subagent"
	"github.com/troupe-rt/troupe/supervision"
)

// Messages between the run actor and the script actor (WORKFLOW.md 1.3, DSH's names).
type (
	// script → run
	msgReady      struct{}
	msgChildStart struct {
		seq int
		req subagent.Request
	}
	msgChildDispose struct{ seq int }
	msgPhase        struct{ title string }
	msgLog          struct{ message string }
	msgAgentStart   struct{ info AgentInfo }
	msgAgentEnd     struct {
		seq     int
		outcome Outcome
	}
	msgResult struct{ res Result }

	// run → script
	msgGo           struct{}
	msgCancel       struct{ reason string }
	msgChildStarted struct {
		seq     int
		childID string
	}
	msgChildStartError struct {
		seq  int
		text string
	}
	msgChildSettled struct {
		seq int
		res subagent.Result
	}
	msgChildFailed struct {
		seq  int
		text string
	}
	msgChildDisposed struct{ seq int }
	// msgCrash makes the script actor panic (the script-crash test hook).
	msgCrash struct{}
)

// budget is the one piece of a run's runtime another goroutine touches: the
// slice budget timer and the run actor's termination both interrupt the runtime
// (Runtime.Interrupt is goroutine-safe). mu guards the fields: which slice is
// running, whether its budget fired, whether the runtime is terminated.
type budget struct {
	limit time.Duration
	mu    struct {
		sync.Mutex
		vm      *goja.Runtime
		gen     uint64
		running bool
		fired   bool
		dead    bool
	}
}

type interruptReason string

const (
	interruptBudget    interruptReason = "budget"
	interruptTerminate interruptReason = "terminate"
)

// begin starts a slice; false once the runtime is terminated.
func (b *budget) begin() (stop func() (timedOut bool), ok bool) {
	b.mu.Lock()
	if b.mu.dead {
		b.mu.Unlock()
		return nil, false
	}
	b.mu.gen++
	gen := b.mu.gen
	b.mu.running = true
	b.mu.Unlock()
	t := time.AfterFunc(b.limit, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.mu.running && b.mu.gen == gen && !b.mu.dead {
			b.mu.fired = true
			b.mu.vm.Interrupt(interruptBudget)
		}
	})
	return func() bool {
		t.Stop()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.mu.running = false
		if b.mu.fired {
			b.mu.dead = true
		}
		return b.mu.fired
	}, true
}

// terminate makes the runtime unusable: a running slice is interrupted and no
// slice begins again.
func (b *budget) terminate() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.mu.dead {
		b.mu.dead = true
		if b.mu.running && b.mu.vm != nil {
			b.mu.vm.Interrupt(interruptTerminate)
		}
	}
}

// agentCall is one accepted agent() call.
type agentCall struct {
	seq       int
	label     string
	phase     *string
	req       subagent.Request
	hasSchema bool
	resolve   func(any) error
	reject    func(any) error
	hasSlot   bool
	published bool
	childID   string
	// finish settles the call's promise once the child's disposal is acknowledged.
	finish func() error
}

// scriptConfig is what a script actor is spawned with.
type scriptConfig struct {
	runID       string
	prog        *goja.Program
	args        json.RawMessage
	maxTotal    int64
	maxItems    int64
	concurrency int
	timeoutMs   int64
	budget      *budget
	inspector   *actor.PID
	session     string
}

// scriptActor owns the run's goja runtime; it is the only goroutine that runs JS.
type scriptActor struct {
	cfg  scriptConfig
	run  *actor.PID
	self *actor.PID
	root *actor.RootContext

	vm        *goja.Runtime
	body      *goja.Promise
	stringify goja.Callable
	jsonParse goja.Callable
	render    goja.Callable
	walk      goja.Callable
	fatalHas  goja.Callable
	fatalAdd  goja.Callable
	errorCtor goja.Value
	mat       *materializer

	started  bool // go arrived: the body ran
	sent     bool // the result was sent
	dead     bool // the runtime is never entered again
	seq      int
	phase    *string
	canceled bool
	reason   string
	inUse    int
	queue    []*agentCall
	calls    map[int]*agentCall
}

func (s *scriptActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.self, s.root = c.Self(), c.ActorSystem().Root
		s.run = c.Parent()
		s.calls = map[int]*agentCall{}
		supervision.Emit(c, s.cfg.inspector, supervision.Event{Kind: supervision.Spawned,
			Node: supervision.Ref{Kind: KindScript, ID: s.cfg.runID}, Parent: supervision.Ref{Kind: KindRun, ID: s.cfg.runID},
			Actor: c.Self().Id, Session: s.cfg.session})
		if err := s.setup(); err != nil {
			s.sendResult(Result{StopReason: StopError, Error: "workflow script failed: " + err.Error()})
			return
		}
		s.send(&msgReady{})
	case *actor.Stopped:
		supervision.Emit(c, s.cfg.inspector, supervision.Event{Kind: supervision.Stopped,
			Node: supervision.Ref{Kind: KindScript, ID: s.cfg.runID}})
	case *msgCrash:
		panic("injected script crash")
	case *msgGo:
		if s.started || s.sent {
			return
		}
		s.started = true
		s.slice(func() error {
			v, err := s.vm.RunProgram(s.cfg.prog)
			if err != nil {
				return err
			}
			if p, ok := v.Export().(*goja.Promise); ok {
				s.body = p
			}
			return nil
		})
	case *msgCancel:
		s.cancel(m.reason)
	case *msgChildStarted:
		s.childStarted(m)
	case *msgChildStartError:
		s.childStartError(m)
	case *msgChildSettled:
		s.childSettled(m)
	case *msgChildFailed:
		s.childFailed(m)
	case *msgChildDisposed:
		s.childDisposed(m.seq)
	}
}

func (s *scriptActor) send(m any) { s.root.Send(s.run, m) }

func (s *scriptActor) sendResult(res Result) {
	if s.sent {
		return
	}
	s.sent = true
	if len(res.Value) == 0 {
		res.Value = nullValue
	}
	s.send(&msgResult{res: res})
}

// preamble builds parallel and pipeline from intrinsics captured before the body
// runs, so a script that overwrites a global only breaks itself.
const preamble = `(function (P, check, isFatal) {
  'use strict';
  function gather(n, start) {
    return new P(function (resolve, reject) {
      var out = [], left = n, done = false;
      for (var j = 0; j < n; j++) out[j] = null;
      if (n === 0) { resolve(out); return; }
      var fin = function (i, v) { if (done) return; out[i] = v; if (--left === 0) { done = true; resolve(out); } };
      var fail = function (i, e) { if (done) return; if (isFatal(e)) { done = true; reject(e); } else fin(i, null); };
      for (var i = 0; i < n; i++) start(i, fin, fail);
    });
  }
  var parallel = function parallel(thunks) {
    var err = check('parallel', thunks, undefined);
    if (err !== undefined) return P.reject(err);
    return gather(thunks.length, function (i, fin, fail) {
      var r;
      try { r = thunks[i](); } catch (e) { fail(i, e); return; }
      P.resolve(r).then(function (v) { fin(i, v); }, function (e) { fail(i, e); });
    });
  };
  var pipeline = function pipeline(items) {
    var stages = Array.prototype.slice.call(arguments, 1);
    var err = check('pipeline', items, stages);
    if (err !== undefined) return P.reject(err);
    return gather(items.length, function (i, fin, fail) {
      var item = items[i];
      var chain = (async function () {
        var v = item;
        for (var s = 0; s < stages.length; s++) v = await stages[s](v, item, i);
        return v;
      })();
      chain.then(function (v) { fin(i, v); }, function (e) { fail(i, e); });
    });
  };
  return [parallel, pipeline];
})`

var preambleProg = goja.MustCompile("workflow:preamble", preamble, false)

// setup installs the globals (WORKFLOW.md 2.2) into a fresh runtime.
func (s *scriptActor) setup() error {
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallStack)
	s.vm = vm
	s.cfg.budget.mu.Lock()
	s.cfg.budget.mu.vm = vm
	s.cfg.budget.mu.Unlock()
	s.mat = &materializer{vm: vm}
	fn := func(src string) (goja.Callable, error) {
		v, err := vm.RunString(src)
		if err != nil {
			return nil, err
		}
		f, _ := goja.AssertFunction(v)
		return f, nil
	}
	var err error
	if s.stringify, err = fn("JSON.stringify"); err != nil {
		return err
	}
	if s.jsonParse, err = fn("JSON.parse"); err != nil {
		return err
	}
	set, err := vm.RunString("new WeakSet()")
	if err != nil {
		return err
	}
	wsHas, _ := goja.AssertFunction(set.(*goja.Object).Get("has"))
	wsAdd, _ := goja.AssertFunction(set.(*goja.Object).Get("add"))
	s.fatalHas = func(_ goja.Value, args ...goja.Value) (goja.Value, error) { return wsHas(set, args...) }
	s.fatalAdd = func(_ goja.Value, args ...goja.Value) (goja.Value, error) { return wsAdd(set, args...) }
	s.errorCtor = vm.Get("Error")
	stringFn, _ := goja.AssertFunction(vm.Get("String"))
	s.render, _ = goja.AssertFunction(vm.ToValue(func(call goja.FunctionCall) goja.Value {
		v := call.Argument(0)
		if o, ok := v.(*goja.Object); ok {
			if st := o.Get("stack"); isPrimitiveString(st) && st.String() != "" {
				return st
			}
			if msg := o.Get("message"); isPrimitiveString(msg) && msg.String() != "" {
				return msg
			}
		}
		r, err := stringFn(goja.Undefined(), v)
		if err != nil {
			panic(err)
		}
		return r
	}))
	s.walk, _ = goja.AssertFunction(vm.ToValue(func(call goja.FunctionCall) goja.Value {
		c := s.mat.walk(call.Argument(0), call.Argument(1).String())
		if c == nil {
			return goja.Undefined()
		}
		return c
	}))
	freeze, _ := goja.AssertFunction(vm.Get("Object").(*goja.Object).Get("freeze"))
	isFatal := vm.ToValue(func(call goja.FunctionCall) goja.Value { return vm.ToValue(s.isFatal(call.Argument(0))) })
	check := vm.ToValue(func(call goja.FunctionCall) goja.Value { return s.checkCombinator(call) })
	mk, err := vm.RunProgram(preambleProg)
	if err != nil {
		return err
	}
	mkFn, _ := goja.AssertFunction(mk)
	pair, err := mkFn(goja.Undefined(), vm.Get("Promise"), check, isFatal)
	if err != nil {
		return err
	}
	hooks := map[string]goja.Value{
		"agent":    vm.ToValue(s.agentHook),
		"parallel": pair.(*goja.Object).Get("0"),
		"pipeline": pair.(*goja.Object).Get("1"),
		"phase":    vm.ToValue(s.phaseHook),
		"log":      vm.ToValue(s.logHook),
	}
	for _, name := range []string{"agent", "parallel", "pipeline", "phase", "log"} {
		if _, err := freeze(goja.Undefined(), hooks[name]); err != nil {
			return err
		}
		if err := vm.Set(name, hooks[name]); err != nil {
			return err
		}
	}
	if s.cfg.args != nil {
		v, err := s.jsonParse(goja.Undefined(), vm.ToValue(string(s.cfg.args)))
		if err != nil {
			return err
		}
		if err := vm.Set("args", v); err != nil {
			return err
		}
	}
	return nil
}

// maxCallStack caps the runtime's call depth (goja's default is unbounded).
const maxCallStack = 10000

func isPrimitiveString(v goja.Value) bool {
	if v == nil {
		return false
	}
	if _, ok := v.(*goja.Object); ok {
		return false
	}
	_, ok := v.Export().(string)
	return ok
}

// engineError is a hook failure: a same-realm Error with name WorkflowError, code,
// fatal, message and stack, remembered by identity as fatal.
func (s *scriptActor) engineError(code messages.Code, msg string) *goja.Object {
	o, err := s.vm.New(s.errorCtor, s.vm.ToValue(msg))
	if err != nil {
		panic(err)
	}
	_ = o.Set("name", "WorkflowError")
	_ = o.Set("code", string(code))
	_ = o.Set("fatal", true)
	_ = o.Set("stack", "WorkflowError: "+msg)
	if _, err := s.fatalAdd(goja.Undefined(), o); err != nil {
		panic(err)
	}
	return o
}

func (s *scriptActor) isFatal(v goja.Value) bool {
	if _, ok := v.(*goja.Object); !ok {
		return false
	}
	r, err := s.fatalHas(goja.Undefined(), v)
	return err == nil && r.ToBoolean()
}

func (s *scriptActor) cancelledError() *goja.Object {
	return s.engineError(CodeCancelled, cancelText(s.reason))
}

// slice runs fn as one uninterrupted stretch of JavaScript (its microtasks
// included) under the budget, then looks at the body's promise.
func (s *scriptActor) slice(fn func() error) {
	if s.dead {
		return
	}
	stop, ok := s.cfg.budget.begin()
	if !ok {
		s.dead = true
		return
	}
	err := fn()
	if err == nil {
		err = s.checkBody()
	}
	timedOut := stop()
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	switch {
	case timedOut:
		s.dead = true
		s.sendResult(Result{StopReason: StopError, Error: "Error: Script execution timed out after " + strconv.FormatInt(s.cfg.timeoutMs, 10) + "ms", AgentsStarted: s.seq})
	case errors.As(err, &ie):
		s.dead = true // terminated by the run actor: it has settled the run
	case errors.As(err, &so):
		s.dead = true
		s.sendResult(Result{StopReason: StopError, Error: "RangeError: Maximum call stack size exceeded", AgentsStarted: s.seq})
	case err != nil:
		s.dead = true
		s.sendResult(Result{StopReason: StopError, Error: s.renderErr(err), AgentsStarted: s.seq})
	}
}

func (s *scriptActor) renderErr(err error) string {
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return s.renderValue(ex.Value())
	}
	if t := err.Error(); t != "" {
		return t
	}
	return "unknown error"
}

// renderValue is WORKFLOW.md 3.4's rendering of a thrown value.
func (s *scriptActor) renderValue(v goja.Value) string {
	r, err := s.render(goja.Undefined(), v)
	if err != nil {
		var ie *goja.InterruptedError
		if errors.As(err, &ie) {
			panic(err)
		}
		return "[unrenderable thrown value]"
	}
	if t := r.String(); t != "" {
		return t
	}
	return "unknown error"
}

// checkBody sends the result once the body's promise has settled.
func (s *scriptActor) checkBody() error {
	if s.sent || s.body == nil {
		return nil
	}
	switch s.body.State() {
	case goja.PromiseStatePending:
		return nil
	case goja.PromiseStateRejected:
		if s.canceled {
			s.sendResult(Result{StopReason: StopCancelled, Error: cancelText(s.reason), AgentsStarted: s.seq})
			return nil
		}
		s.sendResult(Result{StopReason: StopError, Error: s.renderValue(s.body.Result()), AgentsStarted: s.seq})
		return nil
	}
	if s.canceled {
		s.sendResult(Result{StopReason: StopCancelled, Error: cancelText(s.reason), AgentsStarted: s.seq})
		return nil
	}
	text, path, reason, err := s.materialize(s.body.Result(), "workflow result")
	if err != nil {
		return err
	}
	if reason != "" {
		s.sendResult(Result{StopReason: StopError, AgentsStarted: s.seq,
			Error: "WorkflowError: the workflow's return value is not plain JSON data — " + path + ": " + reason + ". Return only JSON-serializable objects/arrays/scalars."})
		return nil
	}
	s.sendResult(Result{Value: json.RawMessage(text), StopReason: StopCompleted, AgentsStarted: s.seq})
	return nil
}

// materialize copies v to JSON text. A failure is (path, reason); err is an
// uncatchable error (interrupt, stack overflow) to propagate.
func (s *scriptActor) materialize(v goja.Value, root string) (text, path, reason string, err error) {
	if v == nil || goja.IsUndefined(v) {
		return "null", "", "", nil
	}
	s.mat.path, s.mat.reason, s.mat.ancestors = "", "", s.mat.ancestors[:0]
	c, err := s.walk(goja.Undefined(), v, s.vm.ToValue(root))
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			return "", root, "reading the value threw: " + s.renderValue(ex.Value()), nil
		}
		return "", "", "", err
	}
	if s.mat.reason != "" {
		return "", s.mat.path, s.mat.reason, nil
	}
	out, err := s.stringify(goja.Undefined(), c)
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			return "", root, "reading the value threw: " + s.renderValue(ex.Value()), nil
		}
		return "", "", "", err
	}
	return out.String(), "", "", nil
}

// rethrowUncatchable propagates an interrupt or stack overflow out of a hook.
func rethrowUncatchable(err error) {
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	if errors.As(err, &ie) || errors.As(err, &so) {
		panic(err)
	}
}

var agentOptionKeys = map[string]bool{"label": true, "phase": true, "schema": true, "provider": true, "model": true}

const supportedOptions = "(supported: label, phase, schema, provider, model)"

// agentHook is agent(prompt, opts?) (WORKFLOW.md 2.3). It never throws: every failure rejects.
func (s *scriptActor) agentHook(call goja.FunctionCall) goja.Value {
	p, resolve, reject := s.vm.NewPromise()
	ret := s.vm.ToValue(p)
	fail := func(code messages.Code, msg string) goja.Value {
		if err := reject(s.engineError(code, msg)); err != nil {
			panic(err)
		}
		return ret
	}
	if s.canceled {
		return fail(CodeCancelled, cancelText(s.reason))
	}
	pv := call.Argument(0)
	if !isPrimitiveString(pv) || pv.String() == "" {
		return fail(CodeInvalidArgument, "agent() requires a non-empty prompt string")
	}
	prompt := pv.String()
	opts := &jv{kind: jObject}
	if ov := call.Argument(1); !goja.IsUndefined(ov) {
		text, path, reason, err := s.materialize(ov, "agent() options")
		if err != nil {
			rethrowUncatchable(err)
		}
		if reason != "" {
			return fail(CodeInvalidArgument, "agent() options must be plain JSON data — "+path+": "+reason)
		}
		if opts, _ = parseJV([]byte(text)); opts == nil || opts.kind != jObject {
			return fail(CodeInvalidArgument, "agent() options must be an object")
		}
	}
	for _, k := range opts.keys {
		switch {
		case k == "effort" || k == "isolation" || k == "agentType":
			return fail(CodeUnsupportedOption, `agent() option "`+k+`" is deferred and not supported by this engine `+supportedOptions)
		case !agentOptionKeys[k]:
			return fail(CodeUnsupportedOption, `agent() option "`+k+`" is not recognized `+supportedOptions)
		}
	}
	str := map[string]*string{}
	for _, k := range []string{"label", "phase", "provider", "model"} {
		if v := opts.get(k); v != nil {
			if !v.isString() {
				return fail(CodeInvalidArgument, `agent() option "`+k+`" must be a string`)
			}
			x := v.str
			str[k] = &x
		}
	}
	var schema json.RawMessage
	if sv := opts.get("schema"); sv != nil {
		if viol := checkSchema(sv); len(viol) > 0 {
			return fail(CodeUnsupportedSchema, "agent() schema is outside the supported subset — unsupported JSON schema: "+joinViolations(viol))
		}
		schema = sv.jsonText()
	}
	if int64(s.seq) >= s.cfg.maxTotal {
		return fail(CodeAgentCap, "this run reached its total agent cap ("+strconv.FormatInt(s.cfg.maxTotal, 10)+
			") — a runaway-loop backstop; raise the applicable maxTotalAgents limit if the scale is intentional")
	}
	s.seq++
	c := &agentCall{seq: s.seq, resolve: resolve, reject: reject, hasSchema: schema != nil}
	if l := str["label"]; l != nil {
		c.label = *l
	} else {
		c.label = defaultLabel(prompt)
	}
	if ph := str["phase"]; ph != nil {
		c.phase = ph
	} else if s.phase != nil {
		x := *s.phase
		c.phase = &x
	}
	c.req = subagent.Request{Prompt: prompt, Label: c.label, OutputSchema: schema}
	if str["provider"] != nil || str["model"] != nil {
		o := &subagent.AgentOptions{}
		if v := str["provider"]; v != nil {
			o.Provider = *v
		}
		if v := str["model"]; v != nil {
			o.Model = *v
		}
		c.req.Options = o
	}
	s.calls[c.seq] = c
	if s.inUse < s.cfg.concurrency && len(s.queue) == 0 {
		s.startCall(c)
	} else {
		s.queue = append(s.queue, c)
	}
	return ret
}

func (s *scriptActor) startCall(c *agentCall) {
	s.inUse++
	c.hasSlot = true
	s.send(&msgChildStart{seq: c.seq, req: c.req})
}

// release frees c's slot and hands it to the oldest waiter.
func (s *scriptActor) release(c *agentCall) {
	if c.hasSlot {
		c.hasSlot = false
		s.inUse--
	}
	delete(s.calls, c.seq)
	for s.inUse < s.cfg.concurrency && len(s.queue) > 0 {
		next := s.queue[0]
		s.queue = s.queue[1:]
		if s.canceled { // cancel rejected every waiter already
			continue
		}
		s.startCall(next)
	}
}

func (s *scriptActor) phaseHook(call goja.FunctionCall) goja.Value {
	if s.canceled {
		panic(s.cancelledError())
	}
	t := call.Argument(0)
	if !isPrimitiveString(t) || t.String() == "" {
		panic(s.engineError(CodeInvalidArgument, "phase() requires a non-empty title string"))
	}
	title := t.String()
	s.phase = &title
	s.send(&msgPhase{title: title})
	return goja.Undefined()
}

func (s *scriptActor) logHook(call goja.FunctionCall) goja.Value {
	if s.canceled {
		panic(s.cancelledError())
	}
	m := call.Argument(0)
	if !isPrimitiveString(m) {
		panic(s.engineError(CodeInvalidArgument, "log() requires a message string"))
	}
	s.send(&msgLog{message: m.String()})
	return goja.Undefined()
}

// checkCombinator validates parallel()/pipeline() arguments (WORKFLOW.md 2.4, WORKFLOW.md 2.5); it
// returns the engine error to reject with, or undefined.
func (s *scriptActor) checkCombinator(call goja.FunctionCall) goja.Value {
	hook := call.Argument(0).String()
	items := call.Argument(1)
	if s.canceled {
		return s.cancelledError()
	}
	arr, ok := items.(*goja.Object)
	if !ok || arr.ClassName() != "Array" {
		if hook == "parallel" {
			return s.engineError(CodeInvalidArgument, "parallel() requires an array of zero-argument functions")
		}
		return s.engineError(CodeInvalidArgument, "pipeline() requires an items array")
	}
	n := arr.Get("length").ToInteger()
	if n > s.cfg.maxItems {
		return s.engineError(CodeItemCap, hook+"() received "+strconv.FormatInt(n, 10)+" items — over the per-call cap ("+
			strconv.FormatInt(s.cfg.maxItems, 10)+"); split the work or raise maxItemsPerCall in the engine config")
	}
	if hook == "parallel" {
		for i := int64(0); i < n; i++ {
			if _, ok := goja.AssertFunction(arr.Get(strconv.FormatInt(i, 10))); !ok {
				return s.engineError(CodeInvalidArgument, "parallel() item "+strconv.FormatInt(i, 10)+" is not a function")
			}
		}
		return goja.Undefined()
	}
	stages := call.Argument(2).(*goja.Object)
	m := stages.Get("length").ToInteger()
	if m == 0 {
		return s.engineError(CodeInvalidArgument, "pipeline() requires at least one stage function")
	}
	for i := int64(0); i < m; i++ {
		if _, ok := goja.AssertFunction(stages.Get(strconv.FormatInt(i, 10))); !ok {
			return s.engineError(CodeInvalidArgument, "pipeline() stage "+strconv.FormatInt(i, 10)+" is not a function")
		}
	}
	return goja.Undefined()
}

// cancel is WORKFLOW.md 2.13: record the first reason, reject every queued waiter.
func (s *scriptActor) cancel(reason string) {
	if s.canceled {
		return
	}
	s.canceled, s.reason = true, reason
	if !s.started {
		s.sendResult(Result{StopReason: StopCancelled, Error: cancelText(reason)})
		return
	}
	q := s.queue
	s.queue = nil
	s.slice(func() error {
		for _, c := range q {
			delete(s.calls, c.seq)
			if err := c.reject(s.cancelledError()); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *scriptActor) childStarted(m *msgChildStarted) {
	c := s.calls[m.seq]
	if c == nil {
		return
	}
	c.childID = m.childID
	if s.canceled {
		c.finish = func() error { return c.reject(s.cancelledError()) }
		s.send(&msgChildDispose{seq: c.seq})
		return
	}
	c.published = true
	s.send(&msgAgentStart{info: AgentInfo{Seq: c.seq, Label: c.label, Phase: c.phase, ChildID: c.childID}})
}

func (s *scriptActor) childStartError(m *msgChildStartError) {
	c := s.calls[m.seq]
	if c == nil {
		return
	}
	s.release(c)
	s.slice(func() error {
		if s.canceled {
			return c.reject(s.cancelledError())
		}
		return c.reject(s.engineError(CodeAgentStart, "agent() could not start a child: "+m.text))
	})
}

func (s *scriptActor) childSettled(m *msgChildSettled) {
	c := s.calls[m.seq]
	if c == nil || !c.published || c.finish != nil {
		return
	}
	res := m.res
	var outcome Outcome
	switch {
	case res.StopReason == subagent.StopCompleted && !c.hasSchema:
		outcome = OutcomeCompleted
		text := res.Text()
		c.finish = func() error { return c.resolve(s.vm.ToValue(text)) }
	case res.StopReason == subagent.StopCompleted && len(res.Structured) > 0:
		outcome = OutcomeCompleted
		structured := string(res.Structured)
		c.finish = func() error {
			v, err := s.jsonParse(goja.Undefined(), s.vm.ToValue(structured))
			if err != nil {
				return err
			}
			return c.resolve(v)
		}
	case res.StopReason == subagent.StopCompleted:
		outcome = OutcomeFailed
		c.finish = func() error { return c.resolve(goja.Null()) }
	case s.canceled:
		outcome = OutcomeCancelled
		c.finish = func() error { return c.reject(s.cancelledError()) }
	default:
		outcome = OutcomeFailed
		c.finish = func() error { return c.resolve(goja.Null()) }
	}
	s.send(&msgAgentEnd{seq: c.seq, outcome: outcome})
	s.send(&msgChildDispose{seq: c.seq})
}

func (s *scriptActor) childFailed(m *msgChildFailed) {
	c := s.calls[m.seq]
	if c == nil || !c.published || c.finish != nil {
		return
	}
	outcome := OutcomeFailed
	if s.canceled {
		outcome = OutcomeCancelled
		c.finish = func() error { return c.reject(s.cancelledError()) }
	} else {
		text := m.text
		c.finish = func() error { return c.reject(s.engineError(CodeAgentResult, "child agent run failed: "+text)) }
	}
	s.send(&msgAgentEnd{seq: c.seq, outcome: outcome})
	s.send(&msgChildDispose{seq: c.seq})
}

func (s *scriptActor) childDisposed(seq int) {
	c := s.calls[seq]
	if c == nil || c.finish == nil {
		return
	}
	s.release(c)
	s.slice(c.finish)
}
