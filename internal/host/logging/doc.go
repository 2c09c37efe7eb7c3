// Package logging builds MetaStore's logger the way etcd 3.6 builds its own,
// so that log pipelines written for etcd parse MetaStore's output unchanged.
//
// The code base logs through *slog.Logger. Here that logger is backed by a
// zap core (go.uber.org/zap, etcd's logging library) configured as etcd's
// logutil.DefaultZapLoggerConfig: one JSON object per line with the keys
// "level" (lowercase), "ts" (local time, microseconds, numeric offset or
// "Z": 2006-01-02T15:04:05.000000Z0700), "caller" (package/file.go:line of
// the logging call) and "msg", then the record's attributes; the same
// sampling (the first 100 identical messages a second, then every 100th);
// --log-format=console gives zap's console encoder with the same fields.
//
// Outputs follow etcd's --log-outputs: "default" and "stderr" write to
// standard error, "stdout" to standard output, anything else is a file
// opened for appending ("/dev/null" discards everything); with
// --enable-log-rotation the single file output is rotated by lumberjack
// (etcd's choice) as --log-rotation-config-json says. "systemd/journal" has
// no journald writer here and falls back to standard error, as etcd does
// when the journal socket is absent.
package logging
