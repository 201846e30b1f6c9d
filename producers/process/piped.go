package process

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/troupe-rt/troupe/actors/job"
	"github.com/troupe-rt/troupe/messages"
	"github.com/troupe-rt/troupe/producers/output"
)

// DefaultEOFGrace is how long Piped.Stop waits, after closing stdin, for the
// process to exit by itself before it sends SIGTERM.
const DefaultEOFGrace = 2 * time.Second

// DefaultStderrTail is how much of a piped process's stderr is kept.
const DefaultStderrTail = 8 << 10

// Piped is a process started without a shell whose stdin and stdout belong to the
// caller (a protocol peer such as an ACP agent), supervised like a shell job: its
// own process group, the job marker in its environment, escapees found by the
// marker scan, and an outcome sent only once the whole marked tree is gone and
// reaped. Stderr goes to a bounded tail.
type Piped struct {
	p      *proc
	stdin  *os.File
	stdout *eofReader
	eof    time.Duration

	stopOnce sync.Once
	stopReq  chan struct{} // closed by the first Stop
	gone     chan struct{} // closed once the tree is gone and stdout is released
	outcome  job.Outcome   // written before gone is closed
	survived bool          // a marked process outlived the SIGKILL wait
	done     chan job.Outcome
}

// StartPiped starts argv[0] with argv[1:] (no shell) in its own process group with
// the job marker TROUPE_JOB=<instance>/<token> appended to cfg.Env (nil: this
// process's environment), in cfg.Dir. cfg.Grace, cfg.EOFGrace (0 → 2 s) and
// cfg.RetainBytes (the stderr tail; 0 → 8 KiB) apply; Shell and Timeout are not
// used. An executable that cannot be started fails here, with nothing left
// running. Otherwise the caller owns Stdin and Stdout and must call Stop (or see
// Done) to end the process.
func StartPiped(argv []string, cfg Config) (*Piped, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, messages.Errorf(messages.CodeInvalidConfig, "process: piped command must be non-empty")
	}
	if cfg.EOFGrace < 0 {
		return nil, messages.Errorf(messages.CodeInvalidConfig, "invalid eofGrace: expected a non-negative duration, got %s", cfg.EOFGrace)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RetainBytes == 0 {
		cfg.RetainBytes = DefaultStderrTail
	}
	cfg = cfg.withDefaults()
	eofGrace := cfg.EOFGrace
	if eofGrace == 0 {
		eofGrace = DefaultEOFGrace
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	p := &proc{
		rec:    job.NewRecord(),
		cfg:    cfg,
		cmd:    cmd,
		tree:   newTree(newToken()),
		buf:    output.New(cfg.RetainBytes),
		cancel: make(chan string, 1),
		panics: make(chan any, 2),
		done:   make(chan job.Outcome, 1),
	}
	p.tree.onReport = cfg.reportHook
	prepareHost()
	if !cfg.NoSubreaper {
		_ = becomeSubreaper()
	}
	if !cfg.NoWatchdog {
		_ = ensureWatchdog()
	}
	cmd.Dir = cfg.Dir
	cmd.Env = append(append([]string(nil), cfg.Env...), string(p.tree.marker))
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	p.readers = []io.ReadCloser{errR}
	pp := &Piped{
		p:       p,
		stdin:   inW,
		stdout:  &eofReader{f: outR, eof: make(chan struct{})},
		eof:     eofGrace,
		stopReq: make(chan struct{}),
		gone:    make(chan struct{}),
		done:    make(chan job.Outcome, 1),
	}
	p.run()
	go pp.settle()
	return pp, nil
}

// settle waits for the supervisor's outcome, then releases stdout: once every
// writer is gone the caller's reader sees EOF after the last buffered frame; a
// pipe still held by a process the scan could not find is closed from our side
// after drainWait.
func (pp *Piped) settle() {
	out := <-pp.p.done
	pp.survived = pp.p.tree.live()
	select {
	case <-pp.stdout.eof:
	case <-time.After(drainWait):
	}
	pp.stdout.f.Close()
	pp.stdin.Close()
	pp.outcome = out
	close(pp.gone)
	pp.done <- out
}

// Stdin is the process's standard input. Closing it is the first step of Stop.
func (pp *Piped) Stdin() io.WriteCloser { return pp.stdin }

// Stdout is the process's standard output. It reads EOF once the tree is gone.
func (pp *Piped) Stdout() io.Reader { return pp.stdout }

// PID is the main process's pid (for tests and diagnostics).
func (pp *Piped) PID() int { return pp.p.cmd.Process.Pid }

// Marker is the TROUPE_JOB=<instance>/<token> entry the tree carries.
func (pp *Piped) Marker() string { return string(pp.p.tree.marker) }

// StderrTail returns the kept tail of stderr (at most the configured bytes, plus
// a dropped-output line when older bytes were evicted). It consumes it.
func (pp *Piped) StderrTail() string {
	s, _ := pp.p.buf.ReadDelta()
	return strings.TrimSuffix(s, output.DroppedLine)
}

// Done sends the outcome once, when the whole marked tree is gone and reaped, with
// the outcome texts of shell jobs ("exit code: 0", "signal: SIGTERM", …).
func (pp *Piped) Done() <-chan job.Outcome { return pp.done }

// Gone is closed when the tree is gone (every caller may wait on it).
func (pp *Piped) Gone() <-chan struct{} { return pp.gone }

// Outcome is the outcome; valid once Gone is closed.
func (pp *Piped) Outcome() job.Outcome {
	<-pp.gone
	return pp.outcome
}

// Survived reports, once Gone is closed, whether a marked process was still alive
// after the SIGKILL wait (10 s): the tree could not be stopped.
func (pp *Piped) Survived() bool {
	<-pp.gone
	return pp.survived
}

// Stop ends the process: it closes stdin and waits EOFGrace for the tree to go by
// itself, then SIGTERMs the group and every marked process, waits Grace, SIGKILLs,
// and waits until no marked process is alive and every child is reaped. Each step
// is skipped once the tree is gone. Stop is idempotent: every call waits for the
// same stop and returns the outcome.
func (pp *Piped) Stop() job.Outcome {
	pp.stopOnce.Do(func() {
		close(pp.stopReq)
		go func() {
			pp.stdin.Close()
			t := time.NewTimer(pp.eof)
			defer t.Stop()
			select {
			case <-pp.gone:
			case <-t.C:
				_ = pp.p.requestCancel("stop")
			}
		}()
	})
	return pp.Outcome()
}

// eofReader notes the first read error of the caller's stdout reads.
type eofReader struct {
	f    *os.File
	once sync.Once
	eof  chan struct{}
}

func (r *eofReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if err != nil {
		r.once.Do(func() { close(r.eof) })
		if errors.Is(err, os.ErrClosed) {
			err = io.EOF
		}
	}
	return n, err
}
