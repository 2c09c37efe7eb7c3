//go:build faultinject

package diskfault

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvVar names the fault specification (see the package doc).
const EnvVar = "METASTORE_DISKFAULT"

// plan is the parsed specification. Package-level state is the point of
// this file: it exists only in the fault-injection build, where the
// process's environment is its one configuration.
var (
	planOnce sync.Once
	planned  spec
	syncs    atomic.Int64
)

type spec struct {
	errorAfter int64 // -1: never
	delay      time.Duration
}

func parse(s string) (spec, error) {
	p := spec{errorAfter: -1}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		switch name {
		case "fsync-error-after":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return spec{}, fmt.Errorf("%s: fsync-error-after=%q: want a count", EnvVar, value)
			}
			p.errorAfter = n
		case "fsync-delay":
			d, err := time.ParseDuration(value)
			if err != nil || d < 0 {
				return spec{}, fmt.Errorf("%s: fsync-delay=%q: want a duration", EnvVar, value)
			}
			p.delay = d
		default:
			return spec{}, fmt.Errorf("%s: unknown fault %q", EnvVar, name)
		}
	}
	return p, nil
}

// BeforeSync applies the planned faults to one fsync of path.
func BeforeSync(path string) error {
	planOnce.Do(func() {
		p, err := parse(os.Getenv(EnvVar))
		if err != nil {
			fmt.Fprintln(os.Stderr, "diskfault:", err)
			os.Exit(2)
		}
		planned = p
	})
	if planned.delay > 0 {
		time.Sleep(planned.delay)
	}
	if n := syncs.Add(1); planned.errorAfter >= 0 && n > planned.errorAfter {
		return fmt.Errorf("fsync %s: injected fault after %d syncs: %w", path, planned.errorAfter, syscall.EIO)
	}
	return nil
}
