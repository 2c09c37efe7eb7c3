package progress

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// LogInterval spaces the log lines written when there is no terminal.
	LogInterval = 5 * time.Second
	// redrawInterval spaces the redraws of the bar.
	redrawInterval = 200 * time.Millisecond
	barWidth       = 40
)

// Reporter reports the progress of one operation.
type Reporter struct {
	label string
	unit  string
	// bar is the terminal the bar is drawn on; nil means log lines.
	bar    io.Writer
	logger *slog.Logger
	now    func() time.Time
	start  time.Time
	next   time.Time
	done   int64
	total  int64
}

// New returns a reporter that draws a bar on out if out is a terminal,
// and logs to logger otherwise. label names the operation ("restoring
// snapshot"), unit what is counted ("records", "bytes").
func New(out *os.File, label, unit string, logger *slog.Logger) *Reporter {
	r := &Reporter{label: label, unit: unit, logger: logger, now: time.Now}
	if out != nil && IsTerminal(out) {
		r.bar = out
	}
	r.start = r.now()
	r.next = r.start
	if r.bar == nil {
		r.next = r.start.Add(LogInterval)
	}
	return r
}

// IsTerminal reports whether f is a terminal (it answers the termios
// ioctl; /dev/null, a character device too, does not).
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// Update records that done of total units are done, and reports it if
// the last report is old enough. A total of 0 means unknown.
func (r *Reporter) Update(done, total int64) {
	r.done, r.total = done, total
	now := r.now()
	if now.Before(r.next) {
		return
	}
	if r.bar != nil {
		r.next = now.Add(redrawInterval)
		r.draw(now)
		return
	}
	r.next = now.Add(LogInterval)
	r.logger.Info(r.label, "done", done, "total", total, "unit", r.unit,
		"percent", percent(done, total), "elapsed", now.Sub(r.start).Round(time.Millisecond).String())
}

// Finish reports the end: the bar drawn full and its line ended, or a
// last log line.
func (r *Reporter) Finish() {
	now := r.now()
	if r.bar != nil {
		if r.total > 0 {
			r.done = r.total
		}
		r.draw(now)
		fmt.Fprintln(r.bar)
		return
	}
	r.logger.Info(r.label+" done", "done", r.done, "unit", r.unit,
		"elapsed", now.Sub(r.start).Round(time.Millisecond).String())
}

func (r *Reporter) draw(now time.Time) {
	filled := 0
	if r.total > 0 {
		filled = int(min(r.done, r.total) * barWidth / r.total)
	}
	fmt.Fprintf(r.bar, "\r%s [%s%s] %3.0f%% %d/%d %s %s", r.label,
		strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled),
		percent(r.done, r.total), r.done, r.total, r.unit, now.Sub(r.start).Round(time.Second))
}

func percent(done, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(min(done, total)) * 100 / float64(total)
}
