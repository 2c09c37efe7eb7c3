package rocksdb

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crashChildEnv names the directory the re-executed test binary writes
// into; its presence turns TestCrashChild into the child process.
const crashChildEnv = "METASTORE_ROCKSDB_CRASH_CHILD"

// Each crash-test batch i puts crashKeysPerBatch keys "d/<i>/<k>",
// range-deletes the "t/" marker area and puts the marker "t/<i>": after a
// crash, every batch must be there whole or not at all, the batches there
// must be 0..M-1, and exactly one marker, t/<M-1>, may exist.
const crashKeysPerBatch = 20

// TestKillMidCommit runs a child process that commits batches as fast as
// it can and reports each one after Commit returns, kills it with
// SIGKILL at a random point, reopens the directory and checks what
// survived. Three rounds on the same directory, each child resuming where
// the last one's database ended. Memtables are tiny, so kills also land
// during flushes and compactions.
func TestKillMidCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	committed := 0 // batches the database held after the last round
	for round := range 3 {
		target := committed + 50 + rand.IntN(200)
		lastReported := runCrashChild(ctx, t, dir, target)
		b := openTest(t, dir)
		n, err := checkCrashContent(b)
		if cerr := b.Close(); cerr != nil {
			t.Fatal(cerr)
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// A Commit that returned wrote its WAL record to the kernel, which
		// survives the process: nothing reported may be missing.
		if n <= lastReported {
			t.Fatalf("round %d: child reported batch %d committed, reopened database holds batches 0..%d", round, lastReported, n-1)
		}
		t.Logf("round %d: killed after batch %d was reported, %d batches survived", round, lastReported, n)
		committed = n
	}
}

// runCrashChild starts the child, kills it once it reports batch target,
// and returns the last batch it reported.
func runCrashChild(ctx context.Context, t *testing.T, dir string, target int) int {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	last, killed := -1, false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "committed ")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil {
			t.Fatalf("child printed %q", sc.Text())
		}
		last = i
		if i >= target && !killed {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			killed = true
		}
	}
	werr := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("deadline exceeded; child stderr:\n%s", stderr.String())
	}
	if !killed {
		t.Fatalf("child exited before being killed (%v); stderr:\n%s", werr, stderr.String())
	}
	return last
}

// checkCrashContent verifies the invariants described at
// crashKeysPerBatch and returns the number of batches present.
func checkCrashContent(b *Backend) (int, error) {
	v := b.ReadView()
	defer v.Release()
	perBatch := map[int]int{}
	var scanErr error
	err := v.Ascend([]byte("d/"), []byte("d0"), func(k, _ []byte) bool {
		parts := strings.Split(string(k), "/")
		i, err := strconv.Atoi(parts[1])
		if err != nil || len(parts) != 3 {
			scanErr = fmt.Errorf("unexpected key %q", k)
			return false
		}
		perBatch[i]++
		return true
	})
	if err != nil {
		return 0, err
	}
	if scanErr != nil {
		return 0, scanErr
	}
	n := len(perBatch)
	for i := range n {
		if c := perBatch[i]; c != crashKeysPerBatch {
			return 0, fmt.Errorf("batch %d has %d of %d keys (present batches are not 0..%d)", i, c, crashKeysPerBatch, n-1)
		}
	}
	var markers []string
	err = v.Ascend([]byte("t/"), []byte("t0"), func(k, _ []byte) bool {
		markers = append(markers, string(k))
		return true
	})
	if err != nil {
		return 0, err
	}
	want := []string(nil)
	if n > 0 {
		want = []string{fmt.Sprintf("t/%08d", n-1)}
	}
	if fmt.Sprint(markers) != fmt.Sprint(want) {
		return 0, fmt.Errorf("markers %q with %d whole batches, want %q", markers, n, want)
	}
	return n, nil
}

// TestCrashChild is the child process of TestKillMidCommit; run on its
// own it skips.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("child process of TestKillMidCommit")
	}
	b := openTest(t, dir)
	start, err := checkCrashContent(b)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(start), uint64(time.Now().UnixNano())))
	value := bytes.Repeat([]byte{'v'}, 2048)
	for i := start; ; i++ {
		bt := b.NewBatch()
		for k := range crashKeysPerBatch {
			bt.Put(fmt.Appendf(nil, "d/%08d/%03d", i, k), value[:rng.IntN(len(value))])
		}
		bt.DeleteRange([]byte("t/"), []byte("t0"))
		bt.Put(fmt.Appendf(nil, "t/%08d", i), nil)
		if err := bt.Commit(); err != nil {
			t.Fatal(err)
		}
		// Unbuffered: the parent learns of the batch only after Commit
		// returned, and never of one that did not.
		if _, err := fmt.Fprintf(os.Stdout, "committed %d\n", i); err != nil {
			t.Fatal(err)
		}
	}
}
