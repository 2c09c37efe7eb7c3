package concurrency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

const (
	etcdImport = `"go.etcd.io/etcd/client/v3/concurrency"`
	ourImport  = `"github.com/metastore-io/metastore/pkg/concurrency"`
	// sampleDir holds code written against etcd's package.
	sampleDir = "testdata/etcdapi"
)

// TestEtcdCodeCompilesWithImportPathChanged builds the sample of etcd
// client code twice: as written (so the sample itself is proven to be
// valid etcd code) and with only the import path replaced by ours, through
// a build overlay so no file on disk changes.
func TestEtcdCodeCompilesWithImportPathChanged(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	src := filepath.Join(sampleDir, "main.go")
	original, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(original, []byte(etcdImport)); n != 1 {
		t.Fatalf("%s imports %s %d times, want exactly once", src, etcdImport, n)
	}
	ported := bytes.Replace(original, []byte(etcdImport), []byte(ourImport), 1)

	dir := t.TempDir()
	portedPath := filepath.Join(dir, "main.go")
	if err := os.WriteFile(portedPath, ported, 0o644); err != nil {
		t.Fatal(err)
	}
	absSrc, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {absSrc: portedPath}})
	if err != nil {
		t.Fatal(err)
	}
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := func(name string, extra ...string) {
		t.Helper()
		args := append([]string{"build", "-o", os.DevNull}, extra...)
		args = append(args, "./"+sampleDir)
		out, err := exec.CommandContext(ctx, goTool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	build("against etcd's package")
	build("against ours", "-overlay="+overlayPath)
}
