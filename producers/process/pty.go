package process

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"

	"github.com/creack/pty"

	"github.com/troupe-rt/troupe/actors/job"
)

// Terminal is the pseudo-terminal of a PTY job: Send types into it, Resize changes
// its window; what the program writes comes out through the job's ReadOutput.
type Terminal struct {
	ptmx atomic.Pointer[os.File]
}

// ErrTerminalClosed is returned by Send and Resize before the job starts and after it ends.
var ErrTerminalClosed = errors.New("terminal is not open (job not started or already finished)")

// Send writes input to the program, as typed (include "\n" to press Enter).
func (t *Terminal) Send(input string) error {
	f := t.ptmx.Load()
	if f == nil {
		return ErrTerminalClosed
	}
	if _, err := f.WriteString(input); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return ErrTerminalClosed
		}
		return err
	}
	return nil
}

// Resize sets the terminal's window size.
func (t *Terminal) Resize(rows, cols uint16) error {
	f := t.ptmx.Load()
	if f == nil {
		return ErrTerminalClosed
	}
	return pty.Setsize(f, &pty.Winsize{Rows: rows, Cols: cols})
}

// DefaultRows and DefaultCols are a new terminal's size.
const (
	DefaultRows = 24
	DefaultCols = 80
)

// PTY returns the spec of an interactive job (kind "pty-send") running command
// under a pseudo-terminal in a new session, and the terminal to talk to it. The
// kill rules are those of Shell.
func PTY(command string, cfg Config) (job.Spec, *Terminal) {
	term := &Terminal{}
	rec := job.NewRecord()
	return job.Spec{Kind: KindPTY, Label: command, Record: rec, Run: func() (job.Hooks, error) {
		if err := cfg.Validate(); err != nil {
			return job.Hooks{}, err
		}
		cfg := cfg.withDefaults()
		cmd := exec.Command(cfg.Shell, "-c", command)
		p, hooks, err := start(cmd, cfg, rec, true)
		if err != nil {
			return hooks, err
		}
		ptmx, err := pty.StartWithAttrs(cmd, &pty.Winsize{Rows: DefaultRows, Cols: DefaultCols},
			&syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL})
		if err != nil {
			p.finish(job.Outcome{Status: job.Failed, Detail: "Error: " + err.Error()})
			return hooks, nil
		}
		term.ptmx.Store(ptmx)
		p.readers = []io.ReadCloser{ptmx}
		p.run()
		return hooks, nil
	}}, term
}
