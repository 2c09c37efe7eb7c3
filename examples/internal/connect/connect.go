// Package connect is the command-line boilerplate the examples share: the
// --endpoints flag, a client, a logger and a deadline.
package connect

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Setup parses the command line, then returns a client for --endpoints, a
// context that ends after --timeout, and a text logger on stderr. The
// returned function closes the client and cancels the context.
func Setup() (context.Context, *clientv3.Client, *slog.Logger, func()) {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated MetaStore (or etcd) client endpoints")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	return ctx, cli, logger, func() {
		cancel()
		cli.Close()
	}
}

// Must exits with a message if err is not nil.
func Must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}
