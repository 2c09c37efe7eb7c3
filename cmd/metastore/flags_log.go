package main

import (
	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/host/logging"
)

// logFlags are etcd's logging flags (--logger, --log-*).
type logFlags struct {
	logger         string
	outputs        []string
	level          string
	format         string
	enableRotation bool
	rotationJSON   string
}

func (o *options) registerLog(fs *pflag.FlagSet) {
	l := &o.log
	fs.StringVar(&l.logger, "logger", "zap", "Currently only supports 'zap' for structured logging.")
	fs.StringSliceVar(&l.outputs, "log-outputs", []string{logging.OutputDefault}, "Specify 'stdout' or 'stderr' to skip journald logging even when running under systemd, or list of comma separated output targets.")
	fs.StringVar(&l.level, "log-level", "info", "Configures log level. Only supports debug, info, warn, error, panic, or fatal.")
	fs.StringVar(&l.format, "log-format", "json", "Configures log format. Only supports json, console.")
	fs.BoolVar(&l.enableRotation, "enable-log-rotation", false, "Enable log rotation of a single log-outputs file target.")
	fs.StringVar(&l.rotationJSON, "log-rotation-config-json", logging.DefaultRotationConfigJSON, "Configures log rotation if enabled with a JSON logger config. MaxSize(MB), MaxAge(days,0=no limit), MaxBackups(0=no limit), LocalTime(use computers local time), Compress(gzip)")
}

// logConfig is the logger the flags describe.
func (o *options) logConfig() logging.Config {
	return logging.Config{
		Logger:             o.log.logger,
		Outputs:            uniqueStrings(o.log.outputs),
		Level:              o.log.level,
		Format:             o.log.format,
		EnableRotation:     o.log.enableRotation,
		RotationConfigJSON: o.log.rotationJSON,
	}
}

// uniqueStrings drops empty and repeated entries, keeping the first order,
// as etcd's UniqueStringsFromFlag does (it also sorts; order does not
// matter to any caller here).
func uniqueStrings(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}
