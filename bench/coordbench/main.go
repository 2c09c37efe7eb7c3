// Command coordbench measures coordination performance of MetaStore and
// etcd side by side, through the same client code (pkg/concurrency, the
// drop-in for etcd's concurrency package):
//
//   - lock throughput: N contenders, each with its own session, loop
//     Lock/Unlock on one mutex for a fixed time; the figure is completed
//     acquire+release cycles per second (the lock is FIFO, so this is the
//     hand-over rate of a contended lock);
//   - election failover: a leader and a standby campaign; the leader gives
//     up and the time until the standby's Campaign returns is recorded.
//     "resign" is a graceful hand-over; "crash" revokes the leader's lease,
//     which is what a crash amounts to once its TTL has run out (the TTL
//     itself is the operator's choice and is left out).
//
// Each --target name=endpoints is measured in turn, on its own key prefix,
// and one table compares them. bench/coordination.sh starts both servers
// and runs this program; run it directly against servers you started:
//
//	go run ./bench/coordbench --target metastore=127.0.0.1:2379 --target etcd=127.0.0.1:32379
package main

import (
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
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/pkg/concurrency"
)

// targetList collects repeated --target flags.
type targetList []target

type target struct{ name, endpoints string }

func (l *targetList) String() string { return fmt.Sprint(*l) }

func (l *targetList) Set(v string) error {
	name, eps, ok := strings.Cut(v, "=")
	if !ok || name == "" || eps == "" {
		return fmt.Errorf("want name=host:port[,host:port...], got %q", v)
	}
	*l = append(*l, target{name: name, endpoints: eps})
	return nil
}

type config struct {
	contenders []int
	duration   time.Duration
	clients    int
	failovers  int
}

func main() {
	var targets targetList
	flag.Var(&targets, "target", "name=endpoints of a server to measure (repeatable)")
	contenders := flag.String("contenders", "10,100", "comma-separated contender counts for the lock benchmark")
	duration := flag.Duration("duration", 10*time.Second, "how long each lock run lasts")
	clients := flag.Int("clients", 10, "gRPC connections the contenders are spread over")
	failovers := flag.Int("failovers", 20, "failovers measured per kind")
	flag.Parse()
	if len(targets) == 0 {
		fmt.Fprintln(os.Stderr, "coordbench: give at least one --target name=endpoints")
		os.Exit(2)
	}
	cfg := config{duration: *duration, clients: *clients, failovers: *failovers}
	for _, f := range strings.Split(*contenders, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "coordbench: bad contender count %q\n", f)
			os.Exit(2)
		}
		cfg.contenders = append(cfg.contenders, n)
	}

	results := make([]map[string]string, len(targets))
	for i, t := range targets {
		fmt.Fprintf(os.Stderr, "coordbench: measuring %s (%s)\n", t.name, t.endpoints)
		r, err := measure(t, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "coordbench: %s: %v\n", t.name, err)
			os.Exit(1)
		}
		results[i] = r
	}
	printTable(targets, cfg, results)
}

// measure runs every benchmark against one target.
func measure(t target, cfg config) (map[string]string, error) {
	clients := make([]*clientv3.Client, cfg.clients)
	for i := range clients {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints:   strings.Split(t.endpoints, ","),
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			return nil, fmt.Errorf("connect: %w", err)
		}
		defer cli.Close()
		clients[i] = cli
	}
	prefix := fmt.Sprintf("/coordbench/%s/%d", t.name, time.Now().UnixNano())
	out := map[string]string{}
	for _, n := range cfg.contenders {
		rate, err := lockThroughput(clients, prefix+"/lock-"+strconv.Itoa(n), n, cfg.duration)
		if err != nil {
			return nil, fmt.Errorf("lock with %d contenders: %w", n, err)
		}
		out[lockRow(n)] = fmt.Sprintf("%.0f", rate)
	}
	for _, kind := range []string{"resign", "crash"} {
		lat, err := failover(clients[0], prefix+"/election-"+kind, kind, cfg.failovers)
		if err != nil {
			return nil, fmt.Errorf("%s failover: %w", kind, err)
		}
		slices.Sort(lat)
		out[failoverRow(kind, "p50")] = ms(lat[len(lat)/2])
		out[failoverRow(kind, "max")] = ms(lat[len(lat)-1])
	}
	return out, nil
}

func lockRow(n int) string { return fmt.Sprintf("lock cycles/s, %d contenders", n) }

func failoverRow(kind, stat string) string {
	return fmt.Sprintf("election failover (%s) %s ms", kind, stat)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// lockThroughput runs n contenders on one mutex for d and returns
// completed Lock+Unlock cycles per second.
func lockThroughput(clients []*clientv3.Client, name string, n int, d time.Duration) (float64, error) {
	sessions := make([]*concurrency.Session, n)
	for i := range sessions {
		s, err := concurrency.NewSession(clients[i%len(clients)], concurrency.WithTTL(30))
		if err != nil {
			return 0, err
		}
		defer s.Close()
		sessions[i] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var cycles atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, n)
	start := time.Now()
	for _, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := concurrency.NewMutex(s, name)
			for {
				if err := m.Lock(ctx); err != nil {
					if ctx.Err() == nil {
						errc <- err
					}
					return
				}
				// Release on a fresh context: the run may end while held.
				if err := m.Unlock(context.Background()); err != nil {
					errc <- err
					return
				}
				if ctx.Err() != nil {
					return
				}
				cycles.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(cycles.Load()) / elapsed.Seconds(), nil
}

// failover measures rounds hand-overs from a leader to a waiting standby.
func failover(cli *clientv3.Client, name, kind string, rounds int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*10*time.Second)
	defer cancel()
	leaderSession, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	if err != nil {
		return nil, err
	}
	leader := concurrency.NewElection(leaderSession, name)
	if err := leader.Campaign(ctx, "leader"); err != nil {
		return nil, err
	}
	var latencies []time.Duration
	for range rounds {
		standbySession, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
		if err != nil {
			return nil, err
		}
		standby := concurrency.NewElection(standbySession, name)
		elected := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			if err := standby.Campaign(ctx, "standby"); err != nil {
				errc <- err
				return
			}
			elected <- time.Now()
		}()
		// Wait until the standby is queued, so only the hand-over is timed.
		if err := awaitCandidates(ctx, cli, name+"/", 2); err != nil {
			return nil, err
		}
		start := time.Now()
		switch kind {
		case "resign":
			err = leader.Resign(ctx)
			leaderSession.Close()
		default:
			leaderSession.Orphan()
			_, err = cli.Revoke(ctx, leaderSession.Lease())
		}
		if err != nil {
			return nil, err
		}
		select {
		case at := <-elected:
			latencies = append(latencies, at.Sub(start))
		case err := <-errc:
			return nil, err
		case <-ctx.Done():
			return nil, errors.New("standby never elected")
		}
		leader, leaderSession = standby, standbySession
	}
	leaderSession.Close()
	return latencies, nil
}

// awaitCandidates waits, watching, until prefix holds n keys.
func awaitCandidates(ctx context.Context, cli *clientv3.Client, prefix string, n int64) error {
	for {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		if resp.Count >= n {
			return nil
		}
		watchCtx, cancel := context.WithCancel(ctx)
		wch := cli.Watch(watchCtx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		select {
		case <-wch:
		case <-ctx.Done():
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

func printTable(targets targetList, cfg config, results []map[string]string) {
	var rows []string
	for _, n := range cfg.contenders {
		rows = append(rows, lockRow(n))
	}
	for _, kind := range []string{"resign", "crash"} {
		rows = append(rows, failoverRow(kind, "p50"), failoverRow(kind, "max"))
	}
	fmt.Printf("\nlock runs of %v; %d failovers per kind; %d connections\n", cfg.duration, cfg.failovers, cfg.clients)
	fmt.Printf("%-40s", "metric")
	for _, t := range targets {
		fmt.Printf("  %12s", t.name)
	}
	fmt.Println()
	for _, row := range rows {
		fmt.Printf("%-40s", row)
		for _, r := range results {
			fmt.Printf("  %12s", r[row])
		}
		fmt.Println()
	}
}
