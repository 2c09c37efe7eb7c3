package sdk

import (
	"fmt"
	"os"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

// TestMain checks up front that both servers and etcdctl are built, so a
// missing build fails once with the command to run. Run as the child of
// testFencingStoppedProcess or testRegistryOwnerDies it is that child instead.
func TestMain(m *testing.M) {
	if spec := os.Getenv(fencingChildEnv); spec != "" {
		os.Exit(fencingChild(spec))
	}
	if spec := os.Getenv(registryChildEnv); spec != "" {
		os.Exit(registryChild(spec))
	}
	if err := checkBinaries(); err != nil {
		fmt.Fprintln(os.Stderr, "sdk:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func checkBinaries() error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	for _, target := range []framework.Target{framework.TargetMetaStore, framework.TargetEtcd} {
		if err := framework.RequireBinary(target.BinaryPath(root), target.BuildHint()); err != nil {
			return err
		}
	}
	return framework.RequireBinary(framework.EtcdctlPath(root), "make tools")
}
