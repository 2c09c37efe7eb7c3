package diskfault

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnvVar names the fault specification (see the package doc).
const EnvVar = "METASTORE_DISKFAULT"

// plan is one parsed specification: what the next syncs and writes do.
// The zero value is not healthy (errorAfter 0 fails every sync); parse
// and healthy return healthy plans.
type plan struct {
	// errorAfter is how many syncs succeed before every later one fails
	// with EIO; -1: never.
	errorAfter int64
	// delay is how long every sync waits first.
	delay time.Duration
	// writeErr, when set, fails every write: EIO (write-error) or ENOSPC
	// (nospace).
	writeErr syscall.Errno
	// only, when set, limits the plan to files whose path contains it
	// (only=rocksdb: the RocksDB engine's, only=snap: the snapshots').
	only string
}

func healthy() plan { return plan{errorAfter: -1} }

// parse reads a specification: comma-separated faults, the empty string
// being a healthy disk. It is compiled into every build (the parser is
// tested and fuzzed without the build tag) but used only by the
// fault-injection build.
func parse(s string) (plan, error) {
	p := healthy()
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, value, hasValue := strings.Cut(part, "=")
		if hasValue != takesValue(name) {
			if hasValue {
				return plan{}, fmt.Errorf("%s: %s takes no value", EnvVar, name)
			}
			return plan{}, fmt.Errorf("%s: %s needs a value (%s=...)", EnvVar, name, name)
		}
		switch name {
		case "fsync-error-after":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return plan{}, fmt.Errorf("%s: fsync-error-after=%q: want a count", EnvVar, value)
			}
			p.errorAfter = n
		case "fsync-error":
			p.errorAfter = 0
		case "fsync-delay":
			d, err := time.ParseDuration(value)
			if err != nil || d < 0 {
				return plan{}, fmt.Errorf("%s: fsync-delay=%q: want a duration", EnvVar, value)
			}
			p.delay = d
		case "only":
			if value == "" {
				return plan{}, fmt.Errorf("%s: only= needs a part of a path", EnvVar)
			}
			p.only = value
		case "write-error", "nospace":
			errno := syscall.EIO
			if name == "nospace" {
				errno = syscall.ENOSPC
			}
			if p.writeErr != 0 && p.writeErr != errno {
				return plan{}, fmt.Errorf("%s: write-error and nospace exclude each other", EnvVar)
			}
			p.writeErr = errno
		default:
			return plan{}, fmt.Errorf("%s: unknown fault %q (want fsync-error, fsync-error-after=N, fsync-delay=D, write-error, nospace or only=PATHPART)", EnvVar, name)
		}
	}
	if p.only != "" && p == (plan{errorAfter: -1, only: p.only}) {
		p.only = "" // limits no fault: a healthy disk, written one way
	}
	return p, nil
}

func takesValue(name string) bool {
	return name == "fsync-error-after" || name == "fsync-delay" || name == "only"
}

// covers reports whether the plan applies to path.
func (p plan) covers(path string) bool { return p.only == "" || strings.Contains(path, p.only) }

// String writes the plan back in the specification's grammar, faults in
// a fixed order, or "healthy": what a member acknowledges on standard
// error when it takes a plan.
func (p plan) String() string {
	var parts []string
	switch {
	case p.errorAfter == 0:
		parts = append(parts, "fsync-error")
	case p.errorAfter > 0:
		parts = append(parts, "fsync-error-after="+strconv.FormatInt(p.errorAfter, 10))
	}
	if p.delay > 0 {
		parts = append(parts, "fsync-delay="+p.delay.String())
	}
	switch p.writeErr {
	case syscall.EIO:
		parts = append(parts, "write-error")
	case syscall.ENOSPC:
		parts = append(parts, "nospace")
	}
	if len(parts) == 0 {
		return "healthy"
	}
	if p.only != "" {
		parts = append(parts, "only="+p.only)
	}
	return strings.Join(parts, ",")
}
