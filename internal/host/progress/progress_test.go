package progress

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestLogsEveryIntervalWithoutATerminal(t *testing.T) {
	var logs bytes.Buffer
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := New(nil, "restoring snapshot", "records", slog.New(slog.NewTextHandler(&logs, nil)))
	r.now, r.start, r.next = clock.now, clock.t, clock.t.Add(LogInterval)
	r.Update(10, 100) // too early
	clock.t = clock.t.Add(LogInterval)
	r.Update(50, 100)
	r.Update(60, 100) // too early again
	r.Finish()
	out := logs.String()
	if n := strings.Count(out, "msg=\"restoring snapshot\""); n != 1 || !strings.Contains(out, "done=50 total=100") || !strings.Contains(out, "percent=50") {
		t.Fatalf("log lines:\n%s\nwant one at 50 of 100", out)
	}
	if !strings.Contains(out, `msg="restoring snapshot done" done=60`) {
		t.Fatalf("no final line:\n%s", out)
	}
}

func TestBarIsRedrawnInPlace(t *testing.T) {
	var bar bytes.Buffer
	clock := &fakeClock{t: time.Unix(1000, 0)}
	r := &Reporter{label: "restoring snapshot", unit: "records", bar: &bar, now: clock.now, start: clock.t, next: clock.t}
	r.Update(25, 100)
	clock.t = clock.t.Add(time.Second)
	r.Update(50, 100)
	r.Finish()
	lines := strings.Split(bar.String(), "\r")
	if len(lines) != 4 || !strings.Contains(lines[1], " 25% 25/100 records") || !strings.Contains(lines[3], "100% 100/100 records") ||
		!strings.Contains(lines[3], "["+strings.Repeat("=", barWidth)+"]") || !strings.HasSuffix(bar.String(), "\n") {
		t.Fatalf("bar output %q", bar.String())
	}
}

func TestDevNullIsNotATerminal(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Fatal("/dev/null taken for a terminal")
	}
}
