package logging

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

// etcd's names for the outputs that are not files.
const (
	OutputDefault = "default"
	OutputStderr  = "stderr"
	OutputStdout  = "stdout"
	OutputJournal = "systemd/journal"
)

// DefaultRotationConfigJSON is etcd's --log-rotation-config-json default.
const DefaultRotationConfigJSON = `{"maxsize": 100, "maxage": 0, "maxbackups": 0, "localtime": false, "compress": false}`

// ErrRotationInvalidOutput is etcd's error for rotation without exactly one
// file output.
var ErrRotationInvalidOutput = errors.New("--log-outputs requires a single file path when --log-rotate-config-json is defined")

// Config is etcd's logging configuration (--logger, --log-*).
type Config struct {
	Logger             string   // only "zap"
	Outputs            []string // --log-outputs; empty means "default"
	Level              string   // debug, info, warn, error, panic, fatal
	Format             string   // json or console
	EnableRotation     bool
	RotationConfigJSON string
}

// Validate checks c as etcd's setupLogging does, with etcd's messages.
func (c Config) Validate() error {
	switch c.Logger {
	case "zap":
	case "capnslog":
		return errors.New("--logger=capnslog is removed in v3.5")
	default:
		return fmt.Errorf("unknown logger option %q", c.Logger)
	}
	if len(c.Outputs) > 1 && slices.Contains(c.Outputs, OutputDefault) {
		return fmt.Errorf("multi logoutput for %q is not supported yet", OutputDefault)
	}
	if _, err := ParseLevel(c.Level); err != nil {
		return err
	}
	if _, err := encoding(c.Format); err != nil {
		return err
	}
	if c.EnableRotation {
		if _, err := rotationFile(c.Outputs); err != nil {
			return err
		}
		if _, err := parseRotation(c.RotationConfigJSON); err != nil {
			return err
		}
	}
	return nil
}

// ParseLevel turns etcd's --log-level into a zap level.
func ParseLevel(s string) (zapcore.Level, error) {
	var l zapcore.Level
	switch s {
	case "debug", "info", "warn", "error", "panic", "fatal":
		return l, l.Set(s)
	case "":
		return zapcore.InfoLevel, nil
	}
	return l, fmt.Errorf("unknown --log-level %q: only supports debug, info, warn, error, panic, or fatal", s)
}

func encoding(format string) (string, error) {
	switch format {
	case "json", "":
		return "json", nil
	case "console":
		return "console", nil
	}
	return "", fmt.Errorf("unknown log format: %s, supported values json, console", format)
}

// EncoderConfig is etcd's (logutil.DefaultZapLoggerConfig.EncoderConfig).
func EncoderConfig() zapcore.EncoderConfig {
	return zapcore.EncoderConfig{
		TimeKey:       "ts",
		LevelKey:      "level",
		NameKey:       "logger",
		CallerKey:     "caller",
		MessageKey:    "msg",
		StacktraceKey: "stacktrace",
		LineEnding:    zapcore.DefaultLineEnding,
		EncodeLevel:   zapcore.LowercaseLevelEncoder,
		EncodeTime: func(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
			enc.AppendString(t.Format("2006-01-02T15:04:05.000000Z0700"))
		},
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	}
}

// Logger is a built logger and the outputs it holds open.
type Logger struct {
	*slog.Logger
	// Zap is the same core as a zap logger, for libraries that take one
	// (clientv3 inside the lock and election services).
	Zap   *zap.Logger
	close func()
}

// Close flushes and closes the file outputs; call it before exiting.
func (l Logger) Close() {
	_ = l.Zap.Sync()
	if l.close != nil {
		l.close()
	}
}

// New builds the logger c describes.
func New(c Config) (Logger, error) {
	if err := c.Validate(); err != nil {
		return Logger{}, err
	}
	level, _ := ParseLevel(c.Level)
	ws, closeOut, err := open(c)
	if err != nil {
		return Logger{}, err
	}
	var enc zapcore.Encoder
	if format, _ := encoding(c.Format); format == "console" {
		enc = zapcore.NewConsoleEncoder(EncoderConfig())
	} else {
		enc = zapcore.NewJSONEncoder(EncoderConfig())
	}
	// etcd's sampling: per second, the first 100 entries with the same
	// level and message, then every 100th.
	core := zapcore.NewSamplerWithOptions(zapcore.NewCore(enc, ws, zap.NewAtomicLevelAt(level)), time.Second, 100, 100)
	zl := zap.New(core, zap.AddCaller(), zap.ErrorOutput(ws), zap.AddStacktrace(zapcore.ErrorLevel))
	l := FromZap(zl)
	l.close = closeOut
	return l, nil
}

// FromZap wraps a zap logger as the code base's *slog.Logger; the caller
// recorded is the slog call site.
func FromZap(zl *zap.Logger) Logger {
	h := zapslog.NewHandler(zl.Core(), zapslog.WithCaller(true))
	return Logger{Logger: slog.New(h), Zap: zl}
}

// open opens etcd's --log-outputs: standard streams and files through
// zap.Open (merged and sorted as etcd's logutil.MergeOutputPaths does),
// the rotated file through lumberjack.
func open(c Config) (zapcore.WriteSyncer, func(), error) {
	outs := c.Outputs
	if len(outs) == 0 {
		outs = []string{OutputDefault}
	}
	var paths []string
	var rotated *lumberjack.Logger
	for _, o := range outs {
		switch o {
		case OutputDefault, OutputStderr, OutputJournal:
			paths = append(paths, OutputStderr)
		case OutputStdout:
			paths = append(paths, OutputStdout)
		default:
			if !c.EnableRotation {
				paths = append(paths, o)
				continue
			}
			lj, err := parseRotation(c.RotationConfigJSON)
			if err != nil {
				return nil, nil, err
			}
			lj.Filename = o
			rotated = lj
		}
	}
	if slices.Contains(paths, "/dev/null") {
		paths = []string{"/dev/null"}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	ws, closeOut, err := zap.Open(paths...)
	if err != nil {
		return nil, nil, fmt.Errorf("open --log-outputs: %w", err)
	}
	if rotated == nil {
		return ws, closeOut, nil
	}
	return zapcore.NewMultiWriteSyncer(ws, zapcore.AddSync(rotated)), func() {
		closeOut()
		rotated.Close()
	}, nil
}

func rotationFile(outs []string) (string, error) {
	var files []string
	for _, o := range outs {
		switch o {
		case OutputDefault, OutputStderr, OutputStdout, OutputJournal:
		default:
			files = append(files, o)
		}
	}
	if len(files) != 1 {
		return "", ErrRotationInvalidOutput
	}
	return files[0], nil
}

func parseRotation(js string) (*lumberjack.Logger, error) {
	lj := &lumberjack.Logger{}
	if js == "" {
		js = DefaultRotationConfigJSON
	}
	if err := json.Unmarshal([]byte(js), &lj); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return nil, fmt.Errorf("improperly formatted log rotation config: %w", err)
		case errors.As(err, &typ):
			return nil, fmt.Errorf("invalid log rotation config: %w", err)
		}
		return nil, fmt.Errorf("fail to unmarshal log rotation config: %w", err)
	}
	return lj, nil
}
