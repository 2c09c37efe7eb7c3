package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: watchmem watch|stats [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	endpoint := fs.String("endpoint", "127.0.0.1:2379", "client endpoint of the server (host:port)")
	var err error
	switch cmd {
	case "watch":
		var c watchConfig
		fs.IntVar(&c.watchers, "watchers", 100_000, "watchers to open in all")
		fs.IntVar(&c.streams, "streams", 100, "gRPC Watch streams the watchers are spread over")
		fs.IntVar(&c.conns, "conns", 1, "gRPC connections the streams are spread over")
		fs.IntVar(&c.window, "window", 64, "creates in flight per stream")
		fs.StringVar(&c.mode, "mode", "keys", "what each watcher watches: keys (one distinct key) or prefixes (one distinct prefix)")
		fs.StringVar(&c.prefix, "prefix", "watchmem/", "prefix of every watched key")
		fs.DurationVar(&c.createTimeout, "create-timeout", 5*time.Minute, "deadline for all creates to be acknowledged")
		parse(fs)
		c.endpoint = *endpoint
		// The signal ends the hold; before that it aborts the creates.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err = watchAndHold(ctx, c, os.Stdout)
	case "stats":
		var c statsConfig
		fs.BoolVar(&c.forceGC, "gc", false, "force a garbage collection first (GET /debug/pprof/heap?gc=1)")
		fs.StringVar(&c.heapProfile, "heap-profile", "", "with -gc: write the heap profile fetched to this file")
		fs.DurationVar(&c.timeout, "timeout", time.Minute, "deadline of the whole subcommand")
		parse(fs)
		c.endpoint = *endpoint
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		defer cancel()
		err = printStats(ctx, c, os.Stdout)
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "watchmem %s: %v\n", cmd, err)
		os.Exit(1)
	}
}

func parse(fs *flag.FlagSet) {
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "watchmem %s: unexpected arguments %q\n", fs.Name(), fs.Args())
		os.Exit(2)
	}
}
