package faults

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/test/framework"
)

var overloadScale = flag.String("overload.scale", "short",
	"sizes of the overload tests: short (make test) or long (100,000 watchers, 5,000 connections, longer floods)")

// overloadSizes are the sizes of one overload run.
type overloadSizes struct {
	watchers    int           // never-read watchers in TestOverloadWatcherNeverReads
	connections int           // concurrent connections in TestOverloadManyClients
	flood       time.Duration // how long the 1 KiB write flood lasts
	bigFlood    time.Duration // how long the max-size puts last
}

func sizesFor(t *testing.T) overloadSizes {
	t.Helper()
	switch *overloadScale {
	case "short":
		return overloadSizes{watchers: 10_000, connections: 2_000, flood: 5 * time.Second, bigFlood: 4 * time.Second}
	case "long":
		return overloadSizes{watchers: 100_000, connections: 5_000, flood: 30 * time.Second, bigFlood: 30 * time.Second}
	}
	t.Fatalf("-overload.scale=%q: want short or long", *overloadScale)
	return overloadSizes{}
}

const (
	// rssBound is the resident memory a member may reach under any of the
	// floods below. The working set of every flood is tens to a few
	// hundred MiB on both servers; a member that buffers events or
	// requests without bound (the failure these tests look for) passes
	// several GiB within the flood. 2 GiB sits far from both, so the
	// verdict does not depend on the load of the machine.
	rssBound = 2 << 30
	// answerTimeout is how long the well-behaved client waits for any one
	// answer: a member that is slow under a flood passes, one that stops
	// answering does not.
	answerTimeout = 10 * time.Second
	// The max-size puts last 4 s at the short scale and 30 s at the long
	// one. etcd keeps the raft log's recent entries in memory (up to
	// --snapshot-count entries plus the 5,000 kept for catching up
	// followers after a snapshot), so every 1.5 MiB put adds 1.5 MiB of
	// resident memory until then: etcd 3.6 passes 3.4 GiB after 30 s of
	// this flood (3 GiB after 4 s on a quiet machine); it is held to
	// rssBound plus the values it took, at the short scale only.
	// MetaStore bounds its log in bytes too (raftnode's logbudget.go) and
	// is held to rssBound at both.
	// maxRequestBytes is the default --max-request-bytes of both servers.
	maxRequestBytes = 1572864
)

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read RSS of %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q of %d: %w", rest, pid, err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status: %v", pid, sc.Err())
}

// rssWatch samples a member's RSS until stopped and keeps the peak.
type rssWatch struct {
	stop chan struct{}
	done chan struct{}
	peak atomic.Int64
	err  error // set before done closes
}

func watchRSS(m *framework.Member) *rssWatch {
	w := &rssWatch{stop: make(chan struct{}), done: make(chan struct{})}
	pid := m.PID()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond) // sampling period, not a synchronisation
		defer tick.Stop()
		for {
			rss, err := rssBytes(pid)
			if err != nil {
				w.err = err
				return
			}
			if rss > w.peak.Load() {
				w.peak.Store(rss)
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// finish stops sampling, fails t if the member exited or passed rssBound,
// and returns the peak.
func (w *rssWatch) finish(t *testing.T, m *framework.Member) int64 {
	t.Helper()
	peak := w.stopPeak(t, m)
	if peak > rssBound {
		t.Errorf("member %s peaked at %d MiB resident, over the %d MiB bound", m.Name(), peak>>20, rssBound>>20)
	}
	return peak
}

// stopPeak stops sampling, fails t if the member exited, and returns the
// peak.
func (w *rssWatch) stopPeak(t *testing.T, m *framework.Member) int64 {
	t.Helper()
	close(w.stop)
	<-w.done
	select {
	case <-m.Exited():
		t.Fatalf("member %s exited under the flood", m.Name())
	default:
	}
	if w.err != nil {
		t.Fatalf("member %s: %v", m.Name(), w.err)
	}
	return w.peak.Load()
}

// wellBehaved is a client doing small puts and gets while a flood runs.
type wellBehaved struct {
	done      chan struct{}
	latencies []time.Duration
	errs      []error
}

func startWellBehaved(ctx context.Context, cli *clientv3.Client, prefix string) *wellBehaved {
	w := &wellBehaved{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ctx.Err() == nil; i++ {
			key := fmt.Sprintf("%s%d", prefix, i%16)
			for _, op := range []func(context.Context) error{
				func(ctx context.Context) error { _, err := cli.Put(ctx, key, strconv.Itoa(i)); return err },
				func(ctx context.Context) error { _, err := cli.Get(ctx, key); return err },
			} {
				octx, cancel := context.WithTimeout(context.Background(), answerTimeout)
				start := time.Now()
				err := op(octx)
				cancel()
				if err != nil {
					w.errs = append(w.errs, err)
					continue
				}
				w.latencies = append(w.latencies, time.Since(start))
			}
		}
	}()
	return w
}

// finish waits for the client's last request and fails t unless every
// request was answered, successfully, within answerTimeout.
func (w *wellBehaved) finish(t *testing.T, what string) {
	t.Helper()
	<-w.done
	n := len(w.latencies)
	if n == 0 {
		t.Fatalf("%s: the well-behaved client got no answer at all", what)
	}
	slices.Sort(w.latencies)
	t.Logf("%s: well-behaved client: %d requests answered, %d errors, p50 %v, p99 %v, max %v",
		what, n, len(w.errs), w.latencies[n/2], w.latencies[n*99/100], w.latencies[n-1])
	if len(w.errs) > 0 {
		t.Errorf("%s: %d of the well-behaved client's requests failed, the first: %v", what, len(w.errs), w.errs[0])
	}
}

// startOverloadMember starts a one-member cluster and returns its member.
func startOverloadMember(t *testing.T) *framework.Member {
	t.Helper()
	c := framework.NewCluster(t, framework.ClusterConfig{Size: 1})
	return c.Member(0)
}

// dialRaw opens a raw gRPC connection to m, closed when t ends: clientv3
// would turn the status the member sent into its own error type.
func dialRaw(t *testing.T, m *framework.Member) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(m.Endpoint(), grpc.WithTransportCredentials(m.GRPCCredentials(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestOverloadWatcherNeverReads opens many watchers on one raw gRPC
// connection that never reads a response, on keys a writer keeps
// updating with 1 KiB values. The member must not buffer their events
// without bound: it stays up, under rssBound, and answers other clients.
func TestOverloadWatcherNeverReads(t *testing.T) {
	sizes := sizesFor(t)
	ctx, cancel := context.WithTimeout(t.Context(), sizes.flood+2*time.Minute)
	defer cancel()
	m := startOverloadMember(t)

	conn := dialRaw(t, m)
	const perStream = 1000 // a stream's create requests fit its flow-control window
	const keys = 100
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	for s := 0; s < sizes.watchers/perStream; s++ {
		stream, err := pb.NewWatchClient(conn).Watch(wctx)
		if err != nil {
			t.Fatalf("watch stream %d: %v", s, err)
		}
		for i := 0; i < perStream; i++ {
			key := fmt.Sprintf("/overload/watched/%03d", (s*perStream+i)%keys)
			req := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
				CreateRequest: &pb.WatchCreateRequest{Key: []byte(key)}}}
			if err := stream.Send(req); err != nil {
				t.Fatalf("watch create %d on stream %d: %v", i, s, err)
			}
		}
	}
	// One answered request after the creates: they have all reached the
	// member before the flood begins.
	if _, err := m.NewClient(t).Get(ctx, "/overload/watched/000"); err != nil {
		t.Fatal(err)
	}

	rss := watchRSS(m)
	fctx, stopFlood := context.WithTimeout(ctx, sizes.flood)
	defer stopFlood()
	good := startWellBehaved(fctx, m.NewClient(t), "/overload/good/")
	value := strings.Repeat("v", 1024)
	var writes, writeErrs atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wcli := m.NewClient(t)
		wg.Go(func() {
			for i := w; fctx.Err() == nil; i += 4 {
				pctx, cancel := context.WithTimeout(ctx, answerTimeout)
				_, err := wcli.Put(pctx, fmt.Sprintf("/overload/watched/%03d", i%keys), value)
				cancel()
				if err == nil {
					writes.Add(1)
				} else if fctx.Err() == nil {
					writeErrs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	good.finish(t, "never-read watchers")
	peak := rss.finish(t, m)
	t.Logf("%s, %d watchers never read on %d streams: %d puts of 1 KiB (%d failed) in %v, peak RSS %d MiB",
		m.Name(), sizes.watchers, sizes.watchers/perStream, writes.Load(), writeErrs.Load(), sizes.flood, peak>>20)
	if writeErrs.Load() > 0 {
		t.Errorf("%d of the writer's puts failed", writeErrs.Load())
	}
	stopWatchers()
	if _, err := m.NewClient(t).Get(ctx, "/overload/watched/000"); err != nil {
		t.Fatalf("after the never-read watchers went away: %v", err)
	}
}

// TestOverloadMaxSizePuts has 64 clients put values just under
// --max-request-bytes at once. The member stays up, under rssBound, and
// answers a well-behaved client; a put over the limit gets etcd's
// "request is too large".
func TestOverloadMaxSizePuts(t *testing.T) {
	sizes := sizesFor(t)
	bigFlood := sizes.bigFlood
	ctx, cancel := context.WithTimeout(t.Context(), bigFlood+2*time.Minute)
	defer cancel()
	m := startOverloadMember(t)
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}

	// The request carries the key and a header besides the value.
	value := strings.Repeat("b", maxRequestBytes-1024)
	tooLarge := &pb.PutRequest{Key: []byte("/overload/too-large"), Value: []byte(strings.Repeat("b", maxRequestBytes+1))}
	raw := pb.NewKVClient(dialRaw(t, m))
	_, err = raw.Put(ctx, tooLarge)
	requireTooLarge(t, err)

	rss := watchRSS(m)
	fctx, stopFlood := context.WithTimeout(ctx, bigFlood)
	defer stopFlood()
	good := startWellBehaved(fctx, m.NewClient(t), "/overload/good/")
	const clients = 64
	var puts, putErrs, tooMany, lastRev atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		cli := m.NewClient(t)
		wg.Go(func() {
			key := fmt.Sprintf("/overload/big/%02d", c)
			for fctx.Err() == nil {
				pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				resp, err := cli.Put(pctx, key, value)
				cancel()
				switch {
				case err == nil:
					puts.Add(1)
					lastRev.Store(max(lastRev.Load(), resp.Header.Revision))
				case errors.Is(err, rpctypes.ErrTooManyRequests):
					// etcd's refusal of a write the member cannot take
					// now: the flood's due, not a failure.
					tooMany.Add(1)
				case fctx.Err() == nil:
					putErrs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	// Compacting as the flood goes keeps the history, and so the stored
	// data, from growing with the length of the run: what is left to
	// bound is the member's handling of the requests themselves.
	compactions := compactEverySecond(fctx, m.NewClient(t), &lastRev)
	// One oversize put in the middle of the flood is refused the same way.
	_, err = raw.Put(ctx, tooLarge)
	requireTooLarge(t, err)
	wg.Wait()
	if err := <-compactions; err != nil {
		t.Errorf("compaction during the flood: %v", err)
	}
	good.finish(t, "max-size puts")
	peak := rss.stopPeak(t, m)
	t.Logf("%s, %d clients putting %d-byte values: %d puts (%d refused with too many requests, %d failed) in %v, peak RSS %d MiB",
		m.Name(), clients, len(value), puts.Load(), tooMany.Load(), putErrs.Load(), bigFlood, peak>>20)
	bound := int64(rssBound)
	if target != framework.TargetMetaStore {
		// etcd holds every entry since its last snapshot in memory by
		// design: its bound grows with the puts this machine let it take.
		bound += puts.Load() * int64(len(value))
	}
	if peak > bound && (target == framework.TargetMetaStore || *overloadScale == "short") {
		t.Errorf("member %s peaked at %d MiB resident, over the %d MiB bound", m.Name(), peak>>20, bound>>20)
	}
	if puts.Load() == 0 {
		t.Errorf("no max-size put succeeded")
	}
	if putErrs.Load() > 0 {
		t.Errorf("%d max-size puts failed, the first: %v", putErrs.Load(), firstErr.Load())
	}
}

// compactEverySecond compacts cli's member to *rev each second until ctx
// ends, then sends the first failure (or nil).
func compactEverySecond(ctx context.Context, cli *clientv3.Client, rev *atomic.Int64) <-chan error {
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(time.Second) // a compaction period, not a synchronisation
		defer tick.Stop()
		var compacted int64
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-tick.C:
			}
			r := rev.Load()
			if r <= compacted {
				continue
			}
			cctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
			_, err := cli.Compact(cctx, r)
			cancel()
			if err != nil {
				done <- fmt.Errorf("compact to %d: %w", r, err)
				return
			}
			compacted = r
		}
	}()
	return done
}

// requireTooLarge checks etcd's answer to a request over --max-request-bytes.
func requireTooLarge(t *testing.T, err error) {
	t.Helper()
	got, want := status.Convert(err), status.Convert(rpctypes.ErrGRPCRequestTooLarge)
	if err == nil || got.Code() != want.Code() || got.Message() != want.Message() {
		t.Fatalf("a put over --max-request-bytes: got %v, want %v", err, rpctypes.ErrGRPCRequestTooLarge)
	}
	if want.Code() != codes.InvalidArgument || want.Message() != "etcdserver: request is too large" {
		t.Fatalf("rpctypes.ErrGRPCRequestTooLarge is %v, not etcd 3.6's", want)
	}
}

// TestOverloadManyClients opens many gRPC connections at once, each
// creating a watch and reading a key. The member stays up, under
// rssBound, answers every one of them and a well-behaved client.
func TestOverloadManyClients(t *testing.T) {
	sizes := sizesFor(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	m := startOverloadMember(t)
	if _, err := m.NewClient(t).Put(ctx, "/overload/shared", "x"); err != nil {
		t.Fatal(err)
	}

	creds := m.GRPCCredentials(t)
	rss := watchRSS(m)
	gctx, stopGood := context.WithCancel(ctx)
	good := startWellBehaved(gctx, m.NewClient(t), "/overload/good/")
	start := time.Now()
	var failed atomic.Int64
	var firstErr atomic.Value
	var opened sync.WaitGroup // every connection has done its get and watch
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < sizes.connections; i++ {
		opened.Add(1)
		wg.Go(func() {
			// Held open until all are done, so the member carries them all at once.
			err := connectWatchGet(ctx, m.Endpoint(), creds, &opened, release)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	opened.Wait()
	elapsed := time.Since(start)
	close(release)
	wg.Wait()
	stopGood()
	good.finish(t, "many clients")
	peak := rss.finish(t, m)
	t.Logf("%s, %d connections each with a watch and a get: all done in %v, %d failed, peak RSS %d MiB",
		m.Name(), sizes.connections, elapsed.Round(time.Millisecond), failed.Load(), peak>>20)
	if failed.Load() > 0 {
		t.Errorf("%d of %d connections failed, the first: %v", failed.Load(), sizes.connections, firstErr.Load())
	}
}

// connectWatchGet opens its own connection to endpoint, creates a watch and
// reads a key, marks opened, and keeps the connection until release.
func connectWatchGet(ctx context.Context, endpoint string, creds credentials.TransportCredentials, opened *sync.WaitGroup, release <-chan struct{}) error {
	done := false
	defer func() {
		if !done {
			opened.Done()
		}
	}()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	stream, err := pb.NewWatchClient(conn).Watch(octx)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	err = stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
		CreateRequest: &pb.WatchCreateRequest{Key: []byte("/overload/shared")}}})
	if err != nil {
		return fmt.Errorf("watch create: %w", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("watch created: %w", err)
	}
	if !resp.Created || resp.Canceled {
		return fmt.Errorf("watch create answered %+v", resp)
	}
	got, err := pb.NewKVClient(conn).Range(octx, &pb.RangeRequest{Key: []byte("/overload/shared")})
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if len(got.Kvs) != 1 {
		return fmt.Errorf("get /overload/shared: %d keys", len(got.Kvs))
	}
	done = true
	opened.Done()
	select {
	case <-release:
	case <-ctx.Done():
	}
	return nil
}
