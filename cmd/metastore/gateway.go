package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/metastore-io/metastore/internal/cluster/tcpproxy"
	"github.com/metastore-io/metastore/internal/host/logging"
	"github.com/metastore-io/metastore/internal/host/sdnotify"
)

// gatewayOptions are `etcd gateway start`'s flags, names and defaults.
type gatewayOptions struct {
	listenAddr        string
	endpoints         []string
	discoverySRV      string
	discoverySRVName  string
	insecureDiscovery bool
	trustedCAFile     string
	retryDelay        time.Duration
}

// newGatewayCommand is `metastore gateway start`, etcd's L4 gateway: a
// TCP proxy in front of the cluster's client URLs (internal/cluster/tcpproxy).
func newGatewayCommand() *cobra.Command {
	gw := &cobra.Command{
		Use:   "gateway <subcommand>",
		Short: "gateway related command",
	}
	o := &gatewayOptions{}
	start := &cobra.Command{
		Use:   "start",
		Short: "start the gateway",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context()) },
	}
	fs := start.Flags()
	fs.StringVar(&o.listenAddr, "listen-addr", "127.0.0.1:23790", "listen address")
	fs.StringVar(&o.discoverySRV, "discovery-srv", "", "DNS domain used to bootstrap initial cluster")
	fs.StringVar(&o.discoverySRVName, "discovery-srv-name", "", "service name to query when using DNS discovery")
	fs.BoolVar(&o.insecureDiscovery, "insecure-discovery", false, "accept insecure SRV records")
	fs.StringVar(&o.trustedCAFile, "trusted-ca-file", "", "path to the client server TLS CA file for verifying the discovered endpoints when discovery-srv is provided.")
	fs.StringSliceVar(&o.endpoints, "endpoints", []string{"127.0.0.1:2379"}, "comma separated etcd cluster endpoints")
	fs.DurationVar(&o.retryDelay, "retry-delay", time.Minute, "duration of delay before retrying failed endpoints")
	gw.AddCommand(start)
	return gw
}

// run proxies until SIGTERM/SIGINT. It logs etcd's gateway lines, in
// particular "ready to proxy client requests" once the listener is bound.
func (o *gatewayOptions) run(ctx context.Context) error {
	built, err := logging.New(logging.Config{Logger: "zap"})
	if err != nil {
		return err
	}
	defer built.Close()
	logger := built.Logger
	logger.Info("Running: ", "args", os.Args)
	ctx, stop := signal.NotifyContext(ctxOrBackground(ctx), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	srvs, err := o.endpointRecords(ctx, logger)
	if err != nil {
		return err
	}
	if err := checkNotSelf(o.listenAddr, srvs); err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listenAddr)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	p, err := tcpproxy.New(tcpproxy.Config{Listener: l, Endpoints: srvs, RetryDelay: o.retryDelay, Logger: logger})
	if err != nil {
		l.Close()
		return err
	}
	logger.Info("notifying init daemon")
	if _, err := sdnotify.Ready(); err != nil {
		logger.Error("failed to notify systemd for readiness", "error", err)
	} else {
		logger.Info("successfully notified init daemon")
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve() }()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	p.Close()
	return err
}

// endpointRecords are the endpoints to proxy to: the SRV records
// --discovery-srv finds (those that pass validation unless
// --insecure-discovery), or --endpoints when it finds none. A URL's
// scheme is dropped: the proxy carries TCP, whatever runs over it.
func (o *gatewayOptions) endpointRecords(ctx context.Context, logger *slog.Logger) ([]*net.SRV, error) {
	var found tcpproxy.Discovered
	if o.discoverySRV != "" {
		d, err := tcpproxy.Discover(ctx, net.DefaultResolver, o.discoverySRV, o.discoverySRVName)
		if err != nil {
			return nil, err
		}
		logger.Info("discovered cluster from SRV", "srv-server", o.discoverySRV, "endpoints", d.URLs)
		found = d
		if !o.insecureDiscovery {
			logger.Info("validating discovered SRV endpoints", "srv-server", o.discoverySRV, "endpoints", d.URLs)
			kept, err := d.KeepSecure(ctx, o.trustedCAFile, (&net.Dialer{}).DialContext, 5*time.Second)
			if err != nil {
				logger.Warn("failed to validate discovered endpoints", "srv-server", o.discoverySRV, "endpoints", kept.URLs, "error", err)
			} else {
				logger.Info("using validated discovered SRV endpoints", "srv-server", o.discoverySRV, "endpoints", kept.URLs)
			}
			found = kept
		}
	}
	if len(found.SRVs) > 0 {
		return found.SRVs, nil
	}
	var srvs []*net.SRV
	for _, ep := range o.endpoints {
		if u, err := url.Parse(ep); err == nil && u.Host != "" {
			ep = u.Host
		}
		host, port, err := net.SplitHostPort(ep)
		if err != nil {
			return nil, fmt.Errorf("error parsing endpoint %q: %w", ep, err)
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("error parsing endpoint %q: port: %w", ep, err)
		}
		srvs = append(srvs, &net.SRV{Target: host, Port: uint16(n)})
	}
	if len(srvs) == 0 {
		return nil, fmt.Errorf("no endpoints found")
	}
	return srvs, nil
}

// checkNotSelf refuses an endpoint that resolves to the gateway's own
// listen address: every connection would loop back into the gateway.
func checkNotSelf(listenAddr string, srvs []*net.SRV) error {
	lhost, lport, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return fmt.Errorf("failed to validate listen address: %s", listenAddr)
	}
	laddrs, err := net.LookupHost(lhost)
	if err != nil {
		return fmt.Errorf("failed to resolve listen host: %s", lhost)
	}
	for _, s := range srvs {
		eaddrs, err := net.LookupHost(s.Target)
		if err != nil {
			return fmt.Errorf("failed to resolve endpoint host: %s", s.Target)
		}
		if strconv.Itoa(int(s.Port)) != lport {
			continue
		}
		for _, ea := range eaddrs {
			for _, la := range laddrs {
				if ea == la {
					return fmt.Errorf("SRV or endpoint (%s:%d->%s:%d) should not resolve to the gateway listen addr (%s)", s.Target, s.Port, ea, s.Port, listenAddr)
				}
			}
		}
	}
	return nil
}
