package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Target names the server binary the suite runs against.
type Target string

const (
	// TargetMetaStore is the server this repository builds: bin/metastore.
	TargetMetaStore Target = "metastore"
	// TargetEtcd is the reference etcd 3.6 server built from tools/:
	// bin/ref/etcd.
	TargetEtcd Target = "etcd"
)

// TargetEnvVar selects the target; unset means TargetMetaStore.
const TargetEnvVar = "E2E_TARGET"

// ExtraFlagsEnvVar holds extra whitespace-separated flags appended to every
// member's command line, e.g. "--storage-engine=rocksdb".
const ExtraFlagsEnvVar = "E2E_EXTRA_FLAGS"

// modulePath identifies the repository root: the directory whose go.mod
// declares this module.
const modulePath = "github.com/metastore-io/metastore"

// TargetFromEnv reads E2E_TARGET.
func TargetFromEnv() (Target, error) {
	switch v := os.Getenv(TargetEnvVar); v {
	case "", string(TargetMetaStore):
		return TargetMetaStore, nil
	case string(TargetEtcd):
		return TargetEtcd, nil
	default:
		return "", fmt.Errorf("%s=%q: want %q or %q", TargetEnvVar, v, TargetMetaStore, TargetEtcd)
	}
}

// BinaryPath is where the target's server binary is built, relative to the
// repository root.
func (t Target) BinaryPath(repoRoot string) string {
	if t == TargetEtcd {
		return filepath.Join(repoRoot, "bin", "ref", "etcd")
	}
	return filepath.Join(repoRoot, "bin", "metastore")
}

// BuildHint is the command that produces the target's binary.
func (t Target) BuildHint() string {
	if t == TargetEtcd {
		return "make tools"
	}
	return "make build"
}

// IsCleanStop reports whether status is what the target's server produces
// after an orderly shutdown on SIGTERM.
//
// MetaStore exits with code 0. etcd (pkg/osutil.HandleInterrupts) runs its
// shutdown handlers, restores the default disposition and re-raises the
// signal, so a clean etcd shutdown is a death by SIGTERM. This is the one
// place where the suite's expectations differ between the two targets.
func (t Target) IsCleanStop(status ExitStatus) bool {
	if status.Signaled() {
		return t == TargetEtcd && status.Signal == syscall.SIGTERM
	}
	return status.Code == 0
}

// EtcdctlPath is the stock etcdctl used against every target.
func EtcdctlPath(repoRoot string) string {
	return filepath.Join(repoRoot, "bin", "ref", "etcdctl")
}

// EtcdutlPath is the stock etcdutl, etcd's offline snapshot tool.
func EtcdutlPath(repoRoot string) string {
	return filepath.Join(repoRoot, "bin", "ref", "etcdutl")
}

// SnapshotTool is the binary that runs `snapshot status|restore` for the
// target's data dirs: etcdutl for etcd, the metastore binary itself.
func (t Target) SnapshotTool(repoRoot string) string {
	if t == TargetEtcd {
		return EtcdutlPath(repoRoot)
	}
	return t.BinaryPath(repoRoot)
}

// RepoRoot walks up from the working directory (a test's package directory)
// to the directory whose go.mod declares the MetaStore module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		isRoot, err := declaresModule(filepath.Join(dir, "go.mod"))
		if err != nil {
			return "", fmt.Errorf("find repository root: %w", err)
		}
		if isRoot {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.mod declaring %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod at path declares modulePath; a
// missing file is not an error (tools/go.mod declares another module, so
// the walk continues past it too).
func declaresModule(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if fields := strings.Fields(lines.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == modulePath, nil
		}
	}
	if err := lines.Err(); err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	return false, nil
}

// RequireBinary checks that path is an executable file and, if not, says
// how to build it.
func RequireBinary(path, buildHint string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("server binary %s: %w (run `%s` first)", path, err, buildHint)
	}
	if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("server binary %s is not an executable file (run `%s` first)", path, buildHint)
	}
	return nil
}

// RequireTargetBinary checks that the binary of the target E2E_TARGET
// names is built, for a suite's TestMain to fail fast with the hint.
func RequireTargetBinary() error {
	target, err := TargetFromEnv()
	if err != nil {
		return err
	}
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	return RequireBinary(target.BinaryPath(root), target.BuildHint())
}

// SkipUnlessMetaStore skips t when the target under test is not MetaStore:
// feature names what only MetaStore has.
func SkipUnlessMetaStore(t testing.TB, feature string) {
	t.Helper()
	target, err := TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if target != TargetMetaStore {
		t.Skipf("%s is MetaStore's own; %s has none (E2E_TARGET=%s)", feature, target, target)
	}
}

// EngineName names the storage engine under test, for test summaries:
// the target's name for etcd, otherwise rocksdb or memory as
// E2E_EXTRA_FLAGS selects.
func EngineName() string {
	target, err := TargetFromEnv()
	if err != nil || target != TargetMetaStore {
		return string(target)
	}
	if strings.Contains(os.Getenv(ExtraFlagsEnvVar), "rocksdb") {
		return "rocksdb"
	}
	return "memory"
}
