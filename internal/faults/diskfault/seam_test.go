package diskfault

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/testutil"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		spec string
		want plan
		text string
	}{
		{"", healthy(), "healthy"},
		{" , ", healthy(), "healthy"},
		{"fsync-error-after=3, fsync-delay=20ms", plan{errorAfter: 3, delay: 20 * time.Millisecond}, "fsync-error-after=3,fsync-delay=20ms"},
		{"fsync-error", plan{errorAfter: 0}, "fsync-error"},
		{"fsync-error-after=0", plan{errorAfter: 0}, "fsync-error"},
		{"write-error", plan{errorAfter: -1, writeErr: syscall.EIO}, "write-error"},
		{"nospace,nospace", plan{errorAfter: -1, writeErr: syscall.ENOSPC}, "nospace"},
		{"fsync-delay=2s,write-error\n", plan{errorAfter: -1, delay: 2 * time.Second, writeErr: syscall.EIO}, "fsync-delay=2s,write-error"},
		{"only=rocksdb,write-error", plan{errorAfter: -1, writeErr: syscall.EIO, only: "rocksdb"}, "write-error,only=rocksdb"},
		{"only=rocksdb", healthy(), "healthy"},
	} {
		p, err := parse(c.spec)
		if err != nil || p != c.want {
			t.Errorf("parse(%q) = %+v, %v; want %+v", c.spec, p, err, c.want)
			continue
		}
		if p.String() != c.text {
			t.Errorf("parse(%q).String() = %q, want %q", c.spec, p.String(), c.text)
		}
		// What a member acknowledges parses back to the same plan.
		if back, err := parse(strings.ReplaceAll(p.String(), "healthy", "")); err != nil || back != p {
			t.Errorf("%q does not parse back: %+v, %v", p.String(), back, err)
		}
	}
	for _, bad := range []string{"fsync-error-after=x", "fsync-error-after=-1", "fsync-delay=-1s", "fsync-delay",
		"fsync-error=1", "write-error=yes", "write-error,nospace", "disk-on-fire", "healthy", "only=", "only"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "fsync-error-after=3,fsync-delay=20ms", "fsync-error", "write-error", "nospace", "fsync-delay=1h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parse(s)
		if err != nil {
			return
		}
		back, err := parse(strings.ReplaceAll(p.String(), "healthy", ""))
		if err != nil || back != p {
			t.Fatalf("parse(%q) = %+v writes %q, which parses to %+v, %v", s, p, p.String(), back, err)
		}
	})
}

// syncBuffer is an io.Writer safe for the watcher and the test together.
type syncBuffer = testutil.SyncBuffer

// waitFor waits until out has gained line after offset, as a test of a
// member waits for its acknowledgement.
func waitFor(t *testing.T, out *syncBuffer, offset int, line string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if strings.Contains(out.String()[offset:], line+"\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %q", line, out.String()[offset:])
		}
		time.Sleep(rereadInterval / 5) // polls the output the watcher writes on its own pace
	}
}

// writeSpec replaces the plan file whole, as a test must.
func writeSpec(t *testing.T, path, spec string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// The plan file switches the faults at runtime, each change acknowledged,
// a malformed file keeping the plan in force.
func TestFileSwitchesFaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk")
	out := &syncBuffer{}
	in, err := fromSpec("file="+path, out)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "" {
		t.Fatalf("an absent file (a healthy disk) was acknowledged: %q", out.String())
	}
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() { in.watch(stop); close(watched) }()
	defer func() { close(stop); <-watched }()
	if err := in.beforeSync("a"); err != nil {
		t.Fatalf("healthy sync: %v", err)
	}

	step := func(spec, ack string) {
		t.Helper()
		offset := len(out.String())
		writeSpec(t, path, spec)
		waitFor(t, out, offset, "diskfault: now "+ack)
	}
	step("fsync-error-after=2", "fsync-error-after=2")
	for i := range 2 {
		if err := in.beforeSync("a"); err != nil {
			t.Fatalf("sync %d of 2 allowed: %v", i+1, err)
		}
	}
	if err := in.beforeSync("/wal/0.wal"); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "/wal/0.wal") {
		t.Fatalf("third sync: %v, want EIO naming the file", err)
	}

	step("nospace", "nospace")
	if err := in.beforeSync("a"); err != nil {
		t.Fatalf("sync under nospace: %v", err)
	}
	var dst bytes.Buffer
	w := faultWriter{in: in, path: "/snap/1.snap", w: &dst}
	if n, err := w.Write([]byte("x")); n != 0 || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "/snap/1.snap") {
		t.Fatalf("write under nospace: %d, %v", n, err)
	}

	offset := len(out.String())
	writeSpec(t, path, "fsync-delay=banana")
	waitFor(t, out, offset, "(keeping nospace)")
	if err := in.beforeWrite("a"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a malformed file changed the plan: %v", err)
	}

	step("write-error", "write-error")
	if err := in.beforeWrite("a"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("write under write-error: %v", err)
	}

	step("only=rocksdb,fsync-error", "fsync-error,only=rocksdb")
	if err := in.beforeSync("/member/wal/0.wal"); err != nil {
		t.Fatalf("a sync outside only=: %v", err)
	}
	if err := in.beforeSync("/member/rocksdb/db-000001"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a sync inside only=: %v", err)
	}

	offset = len(out.String())
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, offset, "diskfault: now healthy")
	if _, err := w.Write([]byte("x")); err != nil || dst.String() != "x" {
		t.Fatalf("healthy write: %v (wrote %q)", err, dst.String())
	}
}

// A sync waiting out fsync-delay stops waiting when the disk is healed.
func TestHealingCutsTheDelayShort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "disk")
	writeSpec(t, path, "fsync-delay=1h")
	out := &syncBuffer{}
	in, err := fromSpec("file="+path, out)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, 0, "diskfault: now fsync-delay=1h0m0s")
	done := make(chan error)
	go func() { done <- in.beforeSync("a") }()
	writeSpec(t, path, "fsync-error")
	in.reread()
	select {
	case err := <-done:
		// The plan in force when the wait ends decides.
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync after the switch: %v, want the new plan's EIO", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the delayed sync did not end when the plan changed")
	}
}

// A fixed plan (the environment's SPEC form) is acknowledged, and a
// malformed one refused.
func TestFixedSpec(t *testing.T) {
	out := &syncBuffer{}
	in, err := fromSpec("fsync-error-after=1", out)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != "diskfault: now fsync-error-after=1\n" {
		t.Fatalf("acknowledged %q", out.String())
	}
	if err := in.beforeSync("a"); err != nil {
		t.Fatal(err)
	}
	if err := in.beforeSync("a"); err == nil || !strings.Contains(err.Error(), "injected fault after 1 syncs") {
		t.Fatalf("second sync: %v", err)
	}
	quiet := &syncBuffer{}
	if _, err := fromSpec("", quiet); err != nil || quiet.String() != "" {
		t.Fatalf("unset: %v, %q", err, quiet.String())
	}
	for _, bad := range []string{"file=", "fsync-delay=x"} {
		if _, err := fromSpec(bad, quiet); err == nil {
			t.Errorf("fromSpec(%q) accepted", bad)
		}
	}
}
