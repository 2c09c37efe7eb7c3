package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// config is what every subcommand accepts.
type config struct {
	endpoint  string
	keys      int
	keySize   int
	valueSize int
	clients   int
	conns     int
	total     int
	since     int64
	expectKey bool
	timeout   time.Duration
	baseline  time.Duration
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: engines load|range|first-read|compact [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var c config
	fs.StringVar(&c.endpoint, "endpoint", "127.0.0.1:2379", "client endpoint of the server")
	fs.IntVar(&c.keys, "keys", 1_000_000, "number of distinct keys")
	fs.IntVar(&c.keySize, "key-size", 64, "key size in bytes")
	fs.IntVar(&c.valueSize, "value-size", 256, "value size in bytes")
	fs.IntVar(&c.clients, "clients", 64, "concurrent requests in flight")
	fs.IntVar(&c.conns, "conns", 8, "gRPC connections the requests share")
	fs.IntVar(&c.total, "total", 100_000, "range: number of Gets")
	fs.Int64Var(&c.since, "since", 0, "first-read: Unix nanoseconds the server was started at")
	fs.BoolVar(&c.expectKey, "expect-key", true, "first-read: the last loaded key must be there (false: any answer will do, for a fresh server)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Minute, "deadline of the whole subcommand")
	fs.DurationVar(&c.baseline, "baseline", 5*time.Second, "compact: seconds of put load measured before the compaction starts")
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var err error
	switch cmd {
	case "load":
		err = load(ctx, c)
	case "range":
		err = rangeRandom(ctx, c)
	case "first-read":
		err = firstRead(ctx, c)
	case "compact":
		err = compactUnderLoad(ctx, c)
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "engines %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func (c config) key(i int) string { return fmt.Sprintf("%0*d", c.keySize, i) }

// value of key i: random bytes seeded by i, the same in every run.
func (c config) value(i int) string {
	value := make([]byte, c.valueSize)
	vr := rand.New(rand.NewPCG(uint64(i), 7))
	for j := range value {
		value[j] = byte(vr.Uint32())
	}
	return string(value)
}

func newClient(endpoint string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	return cli, nil
}

// clients opens c.conns connections; request worker w uses clients[w%conns].
func openClients(c config) ([]*clientv3.Client, func(), error) {
	var clis []*clientv3.Client
	closeAll := func() {
		for _, cli := range clis {
			cli.Close()
		}
	}
	for range max(c.conns, 1) {
		cli, err := newClient(c.endpoint)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clis = append(clis, cli)
	}
	return clis, closeAll, nil
}

// run calls op(worker, i) for every i in [0, n) from c.clients workers and
// returns the rate achieved.
func run(ctx context.Context, c config, n int, op func(cli *clientv3.Client, rng *rand.Rand, i int) error) (float64, error) {
	clis, closeAll, err := openClients(c)
	if err != nil {
		return 0, err
	}
	defer closeAll()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for w := range max(c.clients, 1) {
		wg.Go(func() {
			cli := clis[w%len(clis)]
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := op(cli, rng, i); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// load puts every key once and prints put_rps and keys_loaded; when a put
// fails (etcd past its quota, say) it still prints how many succeeded.
func load(ctx context.Context, c config) error {
	var loaded atomic.Int64
	defer func() { fmt.Printf("keys_loaded=%d\n", loaded.Load()) }()
	rate, err := run(ctx, c, c.keys, func(cli *clientv3.Client, _ *rand.Rand, i int) error {
		if _, err := cli.Put(ctx, c.key(i), c.value(i)); err != nil {
			return fmt.Errorf("put key %d: %w", i, err)
		}
		loaded.Add(1)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("put_rps=%.0f\n", rate)
	return nil
}

func rangeRandom(ctx context.Context, c config) error {
	rate, err := run(ctx, c, c.total, func(cli *clientv3.Client, rng *rand.Rand, _ int) error {
		key := c.key(rng.IntN(c.keys))
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("get %s: %w", key, err)
		}
		if len(resp.Kvs) != 1 || len(resp.Kvs[0].Value) != c.valueSize {
			return fmt.Errorf("get %s: %d keys, want the loaded one", key, len(resp.Kvs))
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("range_rps=%.0f\n", rate)
	return nil
}

// firstRead waits for the server to accept TCP connections, then polls
// with short per-attempt deadlines. Dialing only once the port is open
// keeps gRPC's reconnect backoff (a second or more after a refused
// connection) out of the figure.
func firstRead(ctx context.Context, c config) error {
	if c.since == 0 {
		return errors.New("-since is required")
	}
	for {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", c.endpoint)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server never accepted a connection: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cli, err := newClient(c.endpoint)
	if err != nil {
		return err
	}
	defer cli.Close()
	key := c.key(c.keys - 1)
	for {
		attempt, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		resp, err := cli.Get(attempt, key)
		cancel()
		if err == nil && (len(resp.Kvs) == 1 || !c.expectKey) {
			ms := float64(time.Now().UnixNano()-c.since) / 1e6
			fmt.Printf("first_read_ms=%.0f\n", ms)
			return nil
		}
		if err == nil {
			return fmt.Errorf("get %s after restart: key missing", key)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no successful read: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
