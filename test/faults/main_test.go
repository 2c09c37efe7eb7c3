package faults

import (
	"fmt"
	"os"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// TestMain checks up front that the server binary exists.
func TestMain(m *testing.M) {
	target, err := framework.TargetFromEnv()
	if err == nil {
		var root string
		if root, err = framework.RepoRoot(); err == nil {
			err = framework.RequireBinary(target.BinaryPath(root), target.BuildHint())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
