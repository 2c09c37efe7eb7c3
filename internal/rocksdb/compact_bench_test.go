package rocksdb_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/kvstore"
	"github.com/metastore-io/metastore/internal/memory"
	"github.com/metastore-io/metastore/internal/rocksdb"
)

// BenchmarkCompactionPhases splits what a compaction of every old revision
// costs the apply goroutine, on both engines, into the Compact call (it
// only records the compacted revision: compact-ms), the Commits that
// delete the old revisions a step (kvstore.DefaultCompactionStep) at a
// time (steps per compaction, steps-ms for all of them, max-step-ms for
// the slowest: what a write arriving meanwhile waits behind at most),
// and next-put-ms, the first put and commit after the last step. Each iteration
// rewrites COMPACT_KEYS keys (default 50,000; 64-byte keys, 256-byte
// values, 1,000 puts per commit, as bench/scale.sh writes them) and then
// compacts the revisions the rewrite made old. COMPACT_CPUPROFILE=file
// writes a CPU profile of the first compaction and its commits alone.
func BenchmarkCompactionPhases(b *testing.B) {
	keys := 50_000
	if v := os.Getenv("COMPACT_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		keys = n
	}
	engines := map[string]func() (kvstore.Backend, error){
		"rocksdb": func() (kvstore.Backend, error) { return rocksdb.Open(b.TempDir(), rocksdb.DefaultOptions()) },
		"memory":  func() (kvstore.Backend, error) { return memory.New(), nil },
	}
	for _, engine := range []string{"rocksdb", "memory"} {
		b.Run(engine, func(b *testing.B) { benchCompaction(b, engines[engine], keys) })
	}
}

func benchCompaction(b *testing.B, open func() (kvstore.Backend, error), keys int) {
	be, err := open()
	if err != nil {
		b.Fatal(err)
	}
	s, err := kvstore.Open(be, kvstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
		if c, ok := be.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				b.Error(err)
			}
		}
	}()
	val := make([]byte, 256)
	writeAll := func() {
		for i := range keys {
			for j := 0; j+8 <= len(val); j += 8 {
				binary.LittleEndian.PutUint64(val[j:], rand.Uint64())
			}
			if _, err := s.Put(&etcdserverpb.PutRequest{Key: fmt.Appendf(nil, "%064d", i), Value: val}); err != nil {
				b.Fatal(err)
			}
			if i%1000 == 999 {
				if _, err := s.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		}
		if _, err := s.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	writeAll()
	b.ResetTimer()
	var compact, steps, maxStep, next time.Duration
	n, commits := 0, 0
	for b.Loop() {
		b.StopTimer()
		writeAll()
		stopProfile := startCPUProfile(b, n == 0)
		b.StartTimer()
		t0 := time.Now()
		if _, err := s.Compact(s.Rev()); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for first := true; first || s.Compacting(); first = false {
			c0 := time.Now()
			if _, err := s.Commit(); err != nil {
				b.Fatal(err)
			}
			maxStep = max(maxStep, time.Since(c0))
			commits++
		}
		t2 := time.Now()
		if _, err := s.Put(&etcdserverpb.PutRequest{Key: []byte("x"), Value: val}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Commit(); err != nil {
			b.Fatal(err)
		}
		stopProfile()
		compact, steps, next = compact+t1.Sub(t0), steps+t2.Sub(t1), next+time.Since(t2)
		n++
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(ms(compact), "compact-ms")
	b.ReportMetric(float64(commits)/float64(n), "steps")
	b.ReportMetric(ms(steps), "steps-ms")
	b.ReportMetric(float64(maxStep.Microseconds())/1000, "max-step-ms")
	b.ReportMetric(ms(next), "next-put-ms")
}

// startCPUProfile starts the CPU profile COMPACT_CPUPROFILE asks for, if
// any and if now; the returned func stops it.
func startCPUProfile(b *testing.B, now bool) (stop func()) {
	path := os.Getenv("COMPACT_CPUPROFILE")
	if path == "" || !now {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}
