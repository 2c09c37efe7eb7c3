package memlimit

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestShares(t *testing.T) {
	if b := (Budget{}); b.Limited() || b.Response() != 0 || b.RaftLog() != DefaultRaftLog {
		t.Fatalf("no limit: %+v gives response %d", b, b.Response())
	}
	b := Budget{Limit: 8 << 30}
	if !b.Limited() || b.Response() != 2<<30 || b.RaftLog() != 1<<30 {
		t.Fatalf("8 GiB: response %d", b.Response())
	}
}

func TestFromRuntime(t *testing.T) {
	prev := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	if b := FromRuntime(); b.Limited() {
		t.Fatalf("no limit set: %+v", b)
	}
	debug.SetMemoryLimit(1 << 30)
	if b := FromRuntime(); b.Limit != 1<<30 {
		t.Fatalf("1 GiB set: %+v", b)
	}
}
