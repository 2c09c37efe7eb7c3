package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// TestMain checks up front that the binaries the suite needs exist, so a
// missing build fails once with the command to run instead of once per test.
func TestMain(m *testing.M) {
	if err := checkBinaries(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func checkBinaries() error {
	target, err := framework.TargetFromEnv()
	if err != nil {
		return err
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	// The snapshot interop tests run both servers and etcdutl whatever
	// the target.
	for _, bin := range []struct{ path, hint string }{
		{target.BinaryPath(root), target.BuildHint()},
		{framework.TargetMetaStore.BinaryPath(root), framework.TargetMetaStore.BuildHint()},
		{framework.TargetEtcd.BinaryPath(root), framework.TargetEtcd.BuildHint()},
		{framework.EtcdctlPath(root), "make tools"},
		{framework.EtcdutlPath(root), "make tools"},
		{filepath.Join(root, etcd35Binary), "make tools"},
	} {
		if err := framework.RequireBinary(bin.path, bin.hint); err != nil {
			return err
		}
	}
	return nil
}
