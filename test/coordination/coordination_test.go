package coordination

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

var (
	durationFlag = flag.Duration("coord.duration", 0, "how long to cycle the faults (0: each fault once, the short run of make test)")
	seedFlag     = flag.Uint64("coord.seed", 0, "seed of the workload's and the fault order's choices (0: from the clock)")
	historyFlag  = flag.String("coord.history", "", "write the run's history (calls, beliefs, queue keys, lease probes) to this file as JSON")
)

// TestMain checks up front that the server binary exists.
// A run of it with childEnv set is a child holder (child.go) instead.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	flag.Parse()
	if err := framework.RequireTargetBinary(); err != nil {
		fmt.Fprintln(os.Stderr, "coordination:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// TestCoordination runs the lock workload under every fault: each once by
// default, cycling for -coord.duration otherwise (make
// test-coordination-long).
func TestCoordination(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	Run(t, RunConfig{Faults: faultList(), Duration: *durationFlag, Seed: seed, HistoryFile: *historyFlag})
}
