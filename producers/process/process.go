package process

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/producers/output"
)

// Durations of the kill protocol.
const (
	DefaultGrace = 2 * time.Second // SIGTERM → SIGKILL
	// ScanInterval is how often a running job looks for descendants that escaped
	// its process group, so they are known (and reapable) even if they exit first.
	ScanInterval = 100 * time.Millisecond
	// pollInterval paces the check that a signalled tree is gone.
	pollInterval = 5 * time.Millisecond
	// killWait bounds the wait for SIGKILLed processes to vanish (uninterruptible sleep).
	killWait = 10 * time.Second
	// drainWait bounds the wait for output readers once the tree is gone; a pipe
	// still held by a process the job could not find is then closed from our side.
	drainWait = time.Second
	readChunk = 32 << 10
)

// Kinds of the producers.
const (
	KindShell = "bash"
	KindPTY   = "pty-send"
)

// Config configures a process job. The zero value is valid.
type Config struct {
	// Shell runs the command as `Shell -c command`; "" means /bin/sh.
	Shell string
	// Dir is the working directory; "" means the current one.
	Dir string
	// Env is the environment; nil means this process's environment.
	Env []string
	// Grace is how long a cancelled job has between SIGTERM and SIGKILL; 0 means 2 s.
	Grace time.Duration
	// EOFGrace is used only by StartPiped: how long Stop waits after closing stdin
	// before SIGTERM; 0 means 2 s.
	EOFGrace time.Duration
	// Timeout, if positive, kills the job after it (detail "timeout").
	Timeout time.Duration
	// RetainBytes bounds the unread output kept; 0 means 256 KiB.
	RetainBytes int
	// NoSubreaper leaves this process's subreaper bit alone (see the package doc).
	NoSubreaper bool
	// NoWatchdog starts no watchdog process for this job (see the package doc):
	// its processes are then stopped at this host's death only by Pdeathsig (the
	// main process) and by a later host's sweep — or by a watchdog another job
	// started, which stops every process carrying this host's marker.
	NoWatchdog bool

	// chunkHook, if set, sees every chunk a reader takes (tests use it to panic).
	chunkHook func(output.Channel, []byte)
	// reportHook, if set, sees every pid the job reports to the watchdog, once the
	// report is written (tests wait for one).
	reportHook func(pid int)
}

// Validate checks the values that can be wrong.
func (c Config) Validate() error {
	switch {
	case c.Grace < 0:
		return messages.Errorf(messages.CodeInvalidConfig, "invalid grace: expected a non-negative duration, got %s", c.Grace)
	case c.Timeout < 0:
		return messages.Errorf(messages.CodeInvalidConfig, "invalid timeout: expected a non-negative duration, got %s", c.Timeout)
	case c.RetainBytes < 0:
		return messages.Errorf(messages.CodeInvalidConfig, "invalid retainBytes: expected a non-negative integer, got %d", c.RetainBytes)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Shell == "" {
		c.Shell = "/bin/sh"
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Env == nil {
		c.Env = os.Environ()
	}
	return c
}

// Shell returns the spec of a shell job (kind "bash", labelled with the command).
// Set its Owner before starting it.
//
// The job's output goes two ways: the model reads the consuming delta (ReadOutput,
// rendered as SPEC §3.12 renders it), and a UI follows the non-consuming record
// (Spec.Record, streamed by job.follow). A Spec is meant to be started once.
func Shell(command string, cfg Config) job.Spec {
	rec := job.NewRecord()
	return job.Spec{Kind: KindShell, Label: command, Record: rec, Run: func() (job.Hooks, error) {
		if err := cfg.Validate(); err != nil {
			return job.Hooks{}, err
		}
		cfg := cfg.withDefaults()
		cmd := exec.Command(cfg.Shell, "-c", command)
		_, hooks, err := start(cmd, cfg, rec, false)
		return hooks, err
	}}
}

// proc supervises one job's process tree. Its goroutines: supervise (owns the kill
// protocol and the outcome), one reader per output stream, one os/exec waiter.
type proc struct {
	cfg     Config
	cmd     *exec.Cmd
	tree    *tree
	buf     *output.Buffer
	rec     *job.Record // the UI's non-consuming record
	readers []io.ReadCloser
	cancel  chan string
	panics  chan any
	// The outcome goes to settler (a job's OnSettle: shell and PTY jobs) or, when
	// it is nil, to done (Piped reads it).
	settler *job.Settler
	done    chan job.Outcome
}

// finish hands over the one outcome.
func (p *proc) finish(o job.Outcome) {
	if p.settler != nil {
		p.settler.Settle(o)
		return
	}
	p.done <- o // room for one
}

func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// start launches cmd in a new process group (or session, for a PTY) with the job
// marker in its environment and returns the job's hooks. A process that cannot
// start settles failed at once.
func start(cmd *exec.Cmd, cfg Config, rec *job.Record, pty bool) (*proc, job.Hooks, error) {
	p := &proc{
		rec:     rec,
		cfg:     cfg,
		cmd:     cmd,
		tree:    newTree(newToken()),
		buf:     output.New(cfg.RetainBytes),
		cancel:  make(chan string, 1),
		panics:  make(chan any, 2),
		settler: &job.Settler{},
	}
	p.tree.onReport = cfg.reportHook
	hooks, err := p.start(pty)
	return p, hooks, err
}

// start runs the shell command (a PTY's caller starts the process itself).
func (p *proc) start(pty bool) (job.Hooks, error) {
	cfg, cmd := p.cfg, p.cmd
	hooks := job.Hooks{Cancel: p.requestCancel, CancelNonBlocking: true, OnSettle: p.settler.OnSettle, ReadOutput: p.buf.ReadDelta,
		// ReadDelta copies the buffered delta under the buffer's own lock, which a
		// write holds only to copy into the buffer: it never waits on the program.
		ReadNonBlocking: true,
		// The settler's Settle is called from finish: by supervise as its last
		// step, once the tree is reaped and the readers drained, holding no lock
		// and inside no call of anyone's (the only other finish, a process that
		// could not start, runs inside Run, before OnSettle: it only stores the
		// outcome). Settler.Settle calls troupe's settle outside its own lock.
		SettleInline: true}
	prepareHost()
	if !cfg.NoSubreaper {
		_ = becomeSubreaper()
	}
	if !cfg.NoWatchdog {
		_ = ensureWatchdog() // a failure is Watchdog's error; the job runs unguarded
	}
	cmd.Dir = cfg.Dir
	cmd.Env = append(append([]string(nil), cfg.Env...), string(p.tree.marker))
	if !pty {
		outR, outW, err := os.Pipe()
		if err != nil {
			return job.Hooks{}, err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			return job.Hooks{}, err
		}
		growPipe(outR)
		cmd.Stdout, cmd.Stderr = outW, errW
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = cmd.Start()
		outW.Close()
		errW.Close()
		if err != nil {
			outR.Close()
			errR.Close()
			p.finish(job.Outcome{Status: job.Failed, Detail: "Error: " + err.Error()})
			return hooks, nil
		}
		p.readers = []io.ReadCloser{outR, errR}
		p.run()
	}
	return hooks, nil
}

// pipeBytes is the capacity asked for a shell job's stdout pipe (Linux's default
// is 64 KiB): a writer producing faster than one read's worth blocks, and wakes
// the reader, less often.
const pipeBytes = 1 << 20

// growPipe asks for pipeBytes of capacity on the pipe r reads from; a refusal
// (a lower fs.pipe-max-size, the per-user pipe budget) keeps the default.
func growPipe(r *os.File) {
	if sc, err := r.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeBytes) })
	}
}

// run starts supervision of a started process.
func (p *proc) run() {
	p.tree.full = p.cfg.NoSubreaper
	p.tree.track(p.cmd.Process.Pid)
	go p.supervise()
}

// requestCancel hands the cancel to the supervisor: a non-blocking send, so the
// hooks declare it CancelNonBlocking (the job actor calls it itself).
func (p *proc) requestCancel(string) error {
	select {
	case p.cancel <- "cancel":
	default: // a cancel is already pending: Cancel is idempotent
	}
	return nil
}

type exit struct {
	state *os.ProcessState
	err   error
}

func (p *proc) supervise() {
	var wg sync.WaitGroup
	for i, r := range p.readers {
		ch := output.Stdout
		if i == 1 {
			ch = output.Stderr
		}
		wg.Add(1)
		go p.pump(&wg, r, ch)
	}
	exited := make(chan exit, 1)
	go func() {
		st, err := p.cmd.Process.Wait()
		exited <- exit{st, err}
	}()
	var timeout <-chan time.Time
	if p.cfg.Timeout > 0 {
		t := time.NewTimer(p.cfg.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	scan := time.NewTicker(ScanInterval)
	defer scan.Stop()

	var (
		cause    string // "", "cancel", "timeout", "panic"
		panicVal any
		lastSig  syscall.Signal
		grace    *time.Timer
		graceC   <-chan time.Time
		res      exit
	)
	term := func(why string) {
		if cause != "" {
			return
		}
		cause = why
		lastSig = syscall.SIGTERM
		p.tree.signal(syscall.SIGTERM)
		grace = time.NewTimer(p.cfg.Grace)
		graceC = grace.C
	}
loop:
	for {
		select {
		case <-p.cancel:
			term("cancel")
		case <-timeout:
			term("timeout")
		case v := <-p.panics:
			if panicVal == nil {
				panicVal = v
			}
			term("panic")
		case <-graceC:
			graceC = nil
			lastSig = syscall.SIGKILL
			p.tree.signal(syscall.SIGKILL)
		case <-scan.C:
			p.tree.scan()
		case res = <-exited:
			break loop
		}
	}
	// The main process is gone; stop whatever of the job is left, then reap.
	if p.tree.live() {
		if lastSig == 0 {
			lastSig = syscall.SIGTERM
			p.tree.signal(syscall.SIGTERM)
			grace = time.NewTimer(p.cfg.Grace)
			graceC = grace.C
		}
		if lastSig == syscall.SIGTERM && !p.awaitGone(graceC) {
			lastSig = syscall.SIGKILL
			p.tree.signal(syscall.SIGKILL)
		}
		if lastSig == syscall.SIGKILL {
			p.awaitGone(time.After(killWait))
		}
	}
	if grace != nil {
		grace.Stop()
	}
	p.tree.reap(p.cmd.Process.Pid)
	if !p.tree.live() {
		reportEnd(p.tree.job) // the watchdog forgets the job (its group id may be reused now)
	}
	p.drain(&wg)
	select {
	case v := <-p.panics:
		if panicVal == nil {
			panicVal = v
		}
	default:
	}
	p.finish(p.outcome(res, cause, panicVal, lastSig))
}

// live reports whether any process of the job is still alive.
func (t *tree) live() bool { return len(t.scan()) > 0 }

// awaitGone waits until no process of the job is alive (reaping adopted zombies as
// it goes) or until deadline fires; it reports whether the tree is gone.
func (p *proc) awaitGone(deadline <-chan time.Time) bool {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		p.tree.reap(p.cmd.Process.Pid)
		if !p.tree.live() {
			return true
		}
		select {
		case <-deadline:
			return false
		case <-tick.C:
		}
	}
}

// drain waits for the output readers; past drainWait it closes their pipes, which
// only a process the job could not find still holds.
func (p *proc) drain(wg *sync.WaitGroup) {
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(drainWait):
		for _, r := range p.readers {
			r.Close()
		}
		<-finished
	}
	for _, r := range p.readers {
		r.Close()
	}
}

func (p *proc) pump(wg *sync.WaitGroup, r io.Reader, ch output.Channel) {
	defer wg.Done()
	defer p.buf.End(ch) // before Done: a held-back incomplete rune is read as U+FFFD
	defer func() {
		if v := recover(); v != nil {
			p.panics <- v
			// Keep draining so the process never blocks on a full pipe.
			_, _ = io.Copy(io.Discard, r)
		}
	}()
	b := make([]byte, readChunk)
	for {
		n, err := r.Read(b)
		if n > 0 {
			if p.cfg.chunkHook != nil {
				p.cfg.chunkHook(ch, b[:n])
			}
			p.buf.Write(ch, b[:n])
			channel := "stdout"
			if ch == output.Stderr {
				channel = "stderr"
			}
			p.rec.AppendBytes(b[:n], job.AppendOptions{Channel: channel})
		}
		if err != nil {
			return
		}
	}
}

func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

func (p *proc) outcome(res exit, cause string, panicVal any, lastSig syscall.Signal) job.Outcome {
	if cause == "panic" {
		return job.Outcome{Status: job.Failed, Detail: "Error: output reader panicked: " + job.Panicked(panicVal).Error()}
	}
	if res.err != nil && res.state == nil {
		return job.Outcome{Status: job.Failed, Detail: "Error: " + res.err.Error()}
	}
	ws, _ := res.state.Sys().(syscall.WaitStatus)
	switch {
	case cause == "timeout":
		return job.Outcome{Status: job.Killed, Detail: "timeout"}
	case cause == "cancel":
		if ws.Signaled() {
			return job.Outcome{Status: job.Killed, Detail: "signal: " + signalName(ws.Signal())}
		}
		return job.Outcome{Status: job.Killed, Detail: "signal: " + signalName(lastSig)}
	case ws.Signaled():
		return job.Outcome{Status: job.Killed, Detail: "signal: " + signalName(ws.Signal())}
	}
	code := res.state.ExitCode()
	switch code {
	case 126:
		return job.Outcome{Status: job.Failed, Detail: "exit code: 126 (command not executable)"}
	case 127:
		return job.Outcome{Status: job.Failed, Detail: "exit code: 127 (command not found)"}
	}
	return job.Outcome{Status: job.Completed, Detail: fmt.Sprintf("exit code: %d", code)}
}
