package raftnode

import (
	"context"
	"fmt"
	"log/slog"
)

// raftLogger adapts a *slog.Logger to raft's Logger interface. Messages are
// formatted only when their level is enabled: raft logs at debug level on
// hot paths.
type raftLogger struct {
	l *slog.Logger
}

func (r raftLogger) enabled(level slog.Level) bool {
	return r.l.Enabled(context.Background(), level)
}

func (r raftLogger) emit(level slog.Level, msg string) {
	r.l.Log(context.Background(), level, msg, "component", "raft")
}

func (r raftLogger) Debug(v ...any) {
	if r.enabled(slog.LevelDebug) {
		r.emit(slog.LevelDebug, fmt.Sprint(v...))
	}
}

func (r raftLogger) Debugf(format string, v ...any) {
	if r.enabled(slog.LevelDebug) {
		r.emit(slog.LevelDebug, fmt.Sprintf(format, v...))
	}
}

func (r raftLogger) Info(v ...any) {
	if r.enabled(slog.LevelInfo) {
		r.emit(slog.LevelInfo, fmt.Sprint(v...))
	}
}

func (r raftLogger) Infof(format string, v ...any) {
	if r.enabled(slog.LevelInfo) {
		r.emit(slog.LevelInfo, fmt.Sprintf(format, v...))
	}
}

func (r raftLogger) Warning(v ...any) {
	if r.enabled(slog.LevelWarn) {
		r.emit(slog.LevelWarn, fmt.Sprint(v...))
	}
}

func (r raftLogger) Warningf(format string, v ...any) {
	if r.enabled(slog.LevelWarn) {
		r.emit(slog.LevelWarn, fmt.Sprintf(format, v...))
	}
}

func (r raftLogger) Error(v ...any) {
	if r.enabled(slog.LevelError) {
		r.emit(slog.LevelError, fmt.Sprint(v...))
	}
}

func (r raftLogger) Errorf(format string, v ...any) {
	if r.enabled(slog.LevelError) {
		r.emit(slog.LevelError, fmt.Sprintf(format, v...))
	}
}

// Fatal and Panic mean raft found its own invariants broken and cannot go
// on; raft relies on them not returning. Panicking (rather than exiting)
// leaves the decision to the process.
func (r raftLogger) Fatal(v ...any)                 { r.die(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any) { r.die(fmt.Sprintf(format, v...)) }
func (r raftLogger) Panic(v ...any)                 { r.die(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any) { r.die(fmt.Sprintf(format, v...)) }

func (r raftLogger) die(msg string) {
	r.emit(slog.LevelError, msg)
	panic("raft: " + msg)
}
