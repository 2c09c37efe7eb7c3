package tlsutil

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFileCacheFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	parses := 0
	c := newFileCache(func(b [][]byte) (string, error) {
		parses++
		if string(b[0]) == "bad" {
			return "", errors.New("bad contents")
		}
		return string(b[0]), nil
	}, path)
	if _, err := c.get(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	write := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	for range 3 {
		if v, err := c.get(); err != nil || v != "one" {
			t.Fatalf("get = %q, %v", v, err)
		}
	}
	if parses != 1 {
		t.Fatalf("parsed %d times for an unchanged file, want 1", parses)
	}
	write("bad")
	if _, err := c.get(); err == nil {
		t.Fatal("a bad file was accepted")
	}
	write("two") // same size as "one": the inode and mtime tell
	if v, err := c.get(); err != nil || v != "two" {
		t.Fatalf("after rewrite: %q, %v", v, err)
	}
}
