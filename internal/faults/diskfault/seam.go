package diskfault

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// rereadInterval is how stale a plan read from a file may be.
const rereadInterval = 50 * time.Millisecond

// injector applies a plan, fixed or read from a file, to the syncs and
// writes it is told of. Its methods are safe for concurrent use; reread
// is called by one goroutine at a time (watch).
type injector struct {
	out  io.Writer // where a new plan (or a malformed file) is reported
	path string    // the specification file; "" when the plan is fixed

	current atomic.Pointer[state]
	// lastBad is the last malformed file content reported, so that it is
	// reported once (reread's goroutine only).
	lastBad string
}

// state is a plan in force, with the syncs counted since it took over.
type state struct {
	plan  plan
	syncs atomic.Int64
	// replaced is closed when a newer plan takes over: a sync waiting out
	// fsync-delay stops waiting then (a healed disk is fast at once).
	replaced chan struct{}
}

// fromSpec builds the injector an EnvVar value asks for: file=PATH reads
// the plan from PATH (see reread), anything else is a fixed plan. Both
// acknowledge their first plan on out unless it is a fixed healthy one
// (the variable unset: nothing to say).
func fromSpec(spec string, out io.Writer) (*injector, error) {
	in := &injector{out: out}
	if path, ok := strings.CutPrefix(strings.TrimSpace(spec), "file="); ok {
		if path == "" {
			return nil, fmt.Errorf("%s=%q: want file=PATH", EnvVar, spec)
		}
		in.path = path
		in.install(healthy())
		in.reread()
		return in, nil
	}
	p, err := parse(spec)
	if err != nil {
		return nil, err
	}
	in.install(p)
	return in, nil
}

// install puts p in force and acknowledges it, unless it is the healthy
// plan a fresh injector starts with.
func (in *injector) install(p plan) {
	old := in.current.Swap(&state{plan: p, replaced: make(chan struct{})})
	if old != nil {
		close(old.replaced)
	}
	if old != nil || p != healthy() {
		fmt.Fprintf(in.out, "diskfault: now %s\n", p)
	}
}

// reread reads the plan file and installs its plan if it differs from the
// one in force. An absent or empty file is a healthy disk. A file that
// cannot be read or parsed keeps the plan in force and is reported once;
// a test writes the file by renaming a complete one over it, so a half
// written file is never read.
func (in *injector) reread() {
	data, err := os.ReadFile(in.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		in.reportBad(err.Error())
		return
	}
	p, err := parse(string(data))
	if err != nil {
		in.reportBad(err.Error())
		return
	}
	in.lastBad = ""
	if p != in.current.Load().plan {
		in.install(p)
	}
}

func (in *injector) reportBad(why string) {
	if why == in.lastBad {
		return
	}
	in.lastBad = why
	fmt.Fprintf(in.out, "diskfault: %s: %s (keeping %s)\n", in.path, why, in.current.Load().plan)
}

// watch rereads the plan file every rereadInterval until stop closes
// (never, for the process's own injector). A fixed plan needs no
// watching.
func (in *injector) watch(stop <-chan struct{}) {
	if in.path == "" {
		return
	}
	t := time.NewTicker(rereadInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			in.reread()
		case <-stop:
			return
		}
	}
}

// beforeSync applies the plan to one fsync of path: it waits out the
// delay (cut short when the plan changes) and then fails with EIO if the
// plan in force by then says so.
func (in *injector) beforeSync(path string) error {
	st := in.current.Load()
	if !st.plan.covers(path) {
		return nil
	}
	if st.plan.delay > 0 {
		t := time.NewTimer(st.plan.delay)
		select {
		case <-t.C:
		case <-st.replaced:
			t.Stop()
			st = in.current.Load()
		}
	}
	n := st.syncs.Add(1)
	switch after := st.plan.errorAfter; {
	case after == 0:
		return fmt.Errorf("fsync %s: injected fault (fsync-error): %w", path, syscall.EIO)
	case after > 0 && n > after:
		return fmt.Errorf("fsync %s: injected fault after %d syncs: %w", path, after, syscall.EIO)
	}
	return nil
}

// beforeWrite applies the plan to one write to path.
func (in *injector) beforeWrite(path string) error {
	p := in.current.Load().plan
	errno := p.writeErr
	if errno == 0 || !p.covers(path) {
		return nil
	}
	name := "write-error"
	if errno == syscall.ENOSPC {
		name = "nospace"
	}
	return fmt.Errorf("write %s: injected fault (%s): %w", path, name, errno)
}

// faultWriter passes each write to w through beforeWrite.
type faultWriter struct {
	in   *injector
	path string
	w    io.Writer
}

func (f faultWriter) Write(p []byte) (int, error) {
	if err := f.in.beforeWrite(f.path); err != nil {
		return 0, err
	}
	return f.w.Write(p)
}
