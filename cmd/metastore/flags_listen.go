package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/metastore-io/metastore/internal/cluster/membership"
)

// listenFlags are etcd's listener flags beyond the client and peer URLs.
type listenFlags struct {
	clientHTTPURLs       []string
	metricsURLs          []string
	maxConcurrentStreams uint32
	keepAliveMinTime     time.Duration
	keepAliveInterval    time.Duration
	keepAliveTimeout     time.Duration
	enableGateway        bool
	cors                 []string
	hostWhitelist        []string
	reusePort            bool
	reuseAddress         bool
}

func (o *options) registerListen(fs *pflag.FlagSet) {
	l := &o.listen
	fs.StringSliceVar(&l.clientHTTPURLs, "listen-client-http-urls", nil, "List of URLs to listen on for http only client traffic. Enabling this flag removes http services from --listen-client-urls.")
	fs.StringSliceVar(&l.metricsURLs, "listen-metrics-urls", nil, "List of URLs to listen on for the /metrics and /health endpoints. For https, the client URL TLS info is used.")
	fs.Uint32Var(&l.maxConcurrentStreams, "max-concurrent-streams", math.MaxUint32, "Maximum concurrent streams that each client can open at a time.")
	fs.DurationVar(&l.keepAliveMinTime, "grpc-keepalive-min-time", 5*time.Second, "Minimum duration interval that a client should wait before pinging server.")
	fs.DurationVar(&l.keepAliveInterval, "grpc-keepalive-interval", 2*time.Hour, "Frequency duration of server-to-client ping to check if a connection is alive (0 to disable).")
	fs.DurationVar(&l.keepAliveTimeout, "grpc-keepalive-timeout", 20*time.Second, "Additional duration of wait before closing a non-responsive connection (0 to disable).")
	fs.BoolVar(&l.enableGateway, "enable-grpc-gateway", true, "Enable GRPC gateway.")
	fs.Var(newURLListValue(&l.cors, []string{"*"}, "*"), "cors", "Comma-separated white list of origins for CORS, or cross-origin resource sharing, (empty or * means allow all)")
	fs.StringSliceVar(&l.hostWhitelist, "host-whitelist", []string{"*"}, "Comma-separated acceptable hostnames from HTTP client requests, if server is not secure (empty means allow all).")
	fs.BoolVar(&l.reusePort, "socket-reuse-port", false, "Enable to set socket option SO_REUSEPORT on listeners allowing rebinding of a port already in use.")
	fs.BoolVar(&l.reuseAddress, "socket-reuse-address", false, "Enable to set socket option SO_REUSEADDR on listeners allowing binding to an address in TIME_WAIT state.")
}

// validate checks the listener URLs as etcd's checkBindURLs does.
func (l *listenFlags) validate() error {
	for flag, list := range map[string][]string{
		"--listen-client-http-urls": l.clientHTTPURLs,
		"--listen-metrics-urls":     l.metricsURLs,
	} {
		for _, raw := range uniqueStrings(list) {
			if err := checkBindURL(raw); err != nil {
				return fmt.Errorf("%s: %w", flag, err)
			}
		}
	}
	return nil
}

// checkBindURL is etcd's rule for a URL to listen on: a unix socket, or an
// IP address or "localhost" with a port.
func checkBindURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "unix", "unixs":
		return nil
	case "http", "https":
	default:
		return fmt.Errorf("URL scheme must be http, https, unix, or unixs: %s", raw)
	}
	host, _, err := net.SplitHostPort(u.Host)
	if err != nil {
		return err
	}
	if host != "localhost" && net.ParseIP(host) == nil {
		return fmt.Errorf("expected IP in URL for binding (%s)", raw)
	}
	return nil
}

// listen opens the socket for an etcd listen URL (TLS is wrapped around it
// for https and unixs by wrapListener): a TCP address, or for
// unix:// and unixs:// a socket at host+path (etcd's reading:
// unix://localhost:2379 is the file "localhost:2379" in the working
// directory), replacing a stale socket file as etcd does. The socket
// options are --socket-reuse-port and --socket-reuse-address.
func (l *listenFlags) listen(raw string) (net.Listener, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "unix", "unixs":
		path := u.Host + u.Path
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
		// net.Listen's unix listener removes the file when closed.
		return net.Listen("unix", path)
	case "http", "https":
		lc := net.ListenConfig{Control: l.socketControl}
		return lc.Listen(context.Background(), "tcp", u.Host)
	}
	return nil, fmt.Errorf("%s: URL scheme must be http, https, unix, or unixs", raw)
}

// socketControl sets SO_REUSEPORT / SO_REUSEADDR before bind.
func (l *listenFlags) socketControl(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if l.reuseAddress {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
				return
			}
		}
		if l.reusePort {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// urlListValue is a comma-separated list of URLs checked as etcd checks
// them (scheme, host:port, no path), except the listed exceptions ("*").
type urlListValue struct {
	v          *[]string
	exceptions []string
}

func newURLListValue(p *[]string, def []string, exceptions ...string) *urlListValue {
	*p = def
	return &urlListValue{v: p, exceptions: exceptions}
}

func (u *urlListValue) String() string { return strings.Join(*u.v, ",") }
func (u *urlListValue) Type() string   { return "urls" }

func (u *urlListValue) Set(s string) error {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if !slices.Contains(u.exceptions, e) {
			if err := membership.ValidateURL(e); err != nil {
				return err
			}
		}
		out = append(out, e)
	}
	*u.v = out
	return nil
}
