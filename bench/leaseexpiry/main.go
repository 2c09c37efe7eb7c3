package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCommand(os.Args[2:])
	case "table":
		err = tableCommand(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "leaseexpiry: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: leaseexpiry run -name NAME -endpoints HOST:PORT [flags] | leaseexpiry table [-series] RESULT.json...")
	os.Exit(2)
}

// config is the run subcommand's flags.
type config struct {
	name, endpoints string
	leases          int
	keysPerLease    int
	ttl             time.Duration
	conns           int
	setupClients    int
	putClients      int
	keysPerClient   int
	valueSize       int
	leasedValueSize int
	warmup          time.Duration
	baseline        time.Duration
	after           time.Duration
	bound           time.Duration
	jsonPath        string
}

func parseRunFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&c.name, "name", "", "name of the server in the report")
	fs.StringVar(&c.endpoints, "endpoints", "", "comma-separated client endpoints of the server")
	fs.IntVar(&c.leases, "leases", 100_000, "leases granted, all expiring in the same second")
	fs.IntVar(&c.keysPerLease, "keys-per-lease", 10, "keys attached to each lease")
	fs.DurationVar(&c.ttl, "ttl", 300*time.Second, "time from the first grant to the expiry instant (the first lease's TTL); must cover granting, attaching, -warmup and -baseline")
	fs.IntVar(&c.conns, "conns", 16, "gRPC connections shared by the grant, attach and put workers")
	fs.IntVar(&c.setupClients, "setup-clients", 256, "concurrent grant and attach requests")
	fs.IntVar(&c.putClients, "put-clients", 64, "concurrent put requests of the load")
	fs.IntVar(&c.keysPerClient, "keys-per-put-client", 100, "non-leased keys each put worker cycles through")
	fs.IntVar(&c.valueSize, "value-size", 256, "value size of the load's puts, bytes")
	fs.IntVar(&c.leasedValueSize, "leased-value-size", 64, "value size of the leased keys, bytes")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "load time before the baseline window, not measured")
	fs.DurationVar(&c.baseline, "baseline", 20*time.Second, "baseline window: load time before the expiry instant")
	fs.DurationVar(&c.after, "after", 5*time.Second, "load time after the last leased key is gone (at least 2s)")
	fs.DurationVar(&c.bound, "bound", 10*time.Minute, "fail unless every leased key is gone this long after the expiry instant")
	fs.StringVar(&c.jsonPath, "json", "", "write the result as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.name == "" || c.endpoints == "":
		return c, errors.New("run needs -name and -endpoints")
	case c.leases <= 0 || c.keysPerLease <= 0 || c.putClients <= 0 || c.conns <= 0 || c.setupClients <= 0 || c.keysPerClient <= 0:
		return c, errors.New("counts must be positive")
	case c.after < 2*time.Second:
		return c, errors.New("-after must be at least 2s: the expiry phase needs its last second measured")
	case c.baseline < time.Second:
		return c, errors.New("-baseline must be at least 1s")
	}
	return c, nil
}

func connect(endpoints string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(endpoints, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoints, err)
	}
	return cli, nil
}

func runCommand(args []string) error {
	cfg, err := parseRunFlags(args)
	if err != nil {
		return err
	}
	clients := make([]*clientv3.Client, cfg.conns)
	for i := range clients {
		if clients[i], err = connect(cfg.endpoints); err != nil {
			return err
		}
		defer clients[i].Close()
	}
	// The watch gets its own connection so that the load's requests
	// cannot hold up its events.
	watchCli, err := connect(cfg.endpoints)
	if err != nil {
		return err
	}
	defer watchCli.Close()

	ctx, cancel := context.WithTimeout(context.Background(), cfg.ttl+cfg.bound+cfg.after+2*time.Minute)
	defer cancel()
	r, err := measure(ctx, cfg, clients, watchCli)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.name, err)
	}
	if cfg.jsonPath != "" {
		data, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return fmt.Errorf("encode result: %w", err)
		}
		if err := os.WriteFile(cfg.jsonPath, data, 0o644); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	}
	if err := writeTable(os.Stdout, []*result{r}); err != nil {
		return err
	}
	if r.AllGone < 0 || r.RemainingKeys != 0 {
		return fmt.Errorf("%s: %d of %d leased keys still present %v after the expiry instant",
			cfg.name, r.RemainingKeys, cfg.leases*cfg.keysPerLease, cfg.bound)
	}
	return nil
}

func tableCommand(args []string) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	series := fs.Bool("series", false, "also print each run's per-second load and deletes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("table needs at least one result file")
	}
	var results []*result
	for _, path := range fs.Args() {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read result: %w", err)
		}
		r, err := decodeResult(data)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		results = append(results, r)
	}
	if *series {
		for _, r := range results {
			writeSeries(os.Stdout, r)
		}
		fmt.Println()
	}
	return writeTable(os.Stdout, results)
}
