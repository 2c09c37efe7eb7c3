package faults

import (
	"fmt"
	"os"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// TestMain checks up front that the server binary exists.
func TestMain(m *testing.M) {
	if err := framework.RequireTargetBinary(); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
