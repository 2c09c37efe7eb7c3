package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"google.golang.org/grpc/credentials"

	"github.com/metastore-io/metastore/internal/host/tlsutil"
	"github.com/metastore-io/metastore/internal/member"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// clientListeners are the client-facing sockets, bound before the member
// starts so that a port conflict fails fast and early clients wait in the
// backlog: --listen-client-urls (gRPC, plus HTTP unless
// --listen-client-http-urls takes it), --listen-client-http-urls (HTTP
// only) and --listen-metrics-urls (/metrics and health only). https and
// unixs URLs are wrapped in the client TLS material, as etcd does.
type clientListeners struct {
	grpc    []boundURL
	split   bool // --listen-client-http-urls given: grpc serve gRPC only
	http    []boundURL
	metrics []boundURL
}

// boundURL is a listener and the URL it was opened for.
type boundURL struct {
	l   net.Listener
	url string
	// tlsURL is the https (unixs) URL naming the same socket as an http
	// (unix) url: the listener serves both, TLS told apart per
	// connection, and l is the plain socket.
	tlsURL string
}

func (o *options) openClientListeners(client *tlsutil.Material, logger *slog.Logger) (clientListeners, error) {
	var cl clientListeners
	open := func(urls []string, into *[]boundURL, what string) error {
		for _, group := range groupBySocket(urls) {
			l, err := o.listen.listen(group[0])
			if err != nil {
				return fmt.Errorf("listen for %s on %s: %w", what, strings.Join(group, ","), err)
			}
			b := boundURL{url: group[0]}
			for _, u := range group[1:] {
				if isTLSURL(u) != isTLSURL(b.url) {
					b.tlsURL = u
				}
			}
			if b.tlsURL != "" && isTLSURL(b.url) {
				b.url, b.tlsURL = b.tlsURL, b.url
			}
			// A shared socket is wrapped in TLS per connection, when served.
			b.l = wrapListener(l, b.url, client, "client", logger)
			*into = append(*into, b)
		}
		return nil
	}
	err := open(splitURLs(o.listenClientURLs), &cl.grpc, "clients")
	if err == nil {
		err = open(uniqueStrings(o.listen.clientHTTPURLs), &cl.http, "client HTTP")
	}
	if err == nil {
		err = open(uniqueStrings(o.listen.metricsURLs), &cl.metrics, "metrics")
	}
	if err != nil {
		cl.close()
		return clientListeners{}, err
	}
	cl.split = len(cl.http) > 0
	return cl, nil
}

// groupBySocket groups URLs by the socket they name, in first-seen
// order: etcd binds one listener per host:port (or socket path), so that
// http:// and https:// URLs on one port share it.
func groupBySocket(urls []string) [][]string {
	var groups [][]string
	index := map[string]int{}
	for _, raw := range urls {
		key := raw
		if u, err := url.Parse(raw); err == nil {
			switch u.Scheme {
			case "unix", "unixs":
				key = "unix " + u.Host + u.Path
			case "http", "https":
				key = "tcp " + u.Host
			}
		}
		if i, ok := index[key]; ok {
			groups[i] = append(groups[i], raw)
			continue
		}
		index[key] = len(groups)
		groups = append(groups, []string{raw})
	}
	return groups
}

// gatewayTarget is where the JSON gateway dials when the HTTP endpoints
// are served apart from gRPC; otherwise each listener dials itself.
func (cl clientListeners) gatewayTarget() string {
	if !cl.split || len(cl.grpc) == 0 {
		return ""
	}
	return etcdcompat.DialTarget(cl.grpc[0].l.Addr())
}

// gatewayCreds are how the split gateway dials gatewayTarget: TLS when
// that listener is https/unixs.
func (cl clientListeners) gatewayCreds(client *tlsutil.Material) (credentials.TransportCredentials, error) {
	if !cl.split || len(cl.grpc) == 0 || !isTLSURL(cl.grpc[0].url) {
		return nil, nil
	}
	c, err := client.GatewayConfig()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(c), nil
}

// serverListeners are the listeners as the member serves them. A TLS
// client URL serves gRPC and HTTP on the one TLS connection, told apart
// per request; a socket both an http and an https URL name serves both,
// told apart per connection (etcdcompat's ServeMixed).
func (cl clientListeners) serverListeners(client *tlsutil.Material, logger *slog.Logger) ([]member.ClientListener, error) {
	var out []member.ClientListener
	add := func(b boundURL, kind etcdcompat.ListenerKind) error {
		if b.tlsURL == "" && !isTLSURL(b.url) {
			out = append(out, member.ClientListener{Listener: b.l, Serve: func(clients *etcdcompat.ClientServer, l net.Listener) error {
				logServing(logger, l, kind, insecureTraffic)
				return clients.ServeKind(l, kind)
			}})
			return nil
		}
		gatewayTLS, err := client.GatewayConfig()
		if err != nil {
			return fmt.Errorf("client TLS: %w", err)
		}
		if b.tlsURL == "" {
			out = append(out, member.ClientListener{Listener: b.l, Serve: func(clients *etcdcompat.ClientServer, l net.Listener) error {
				logServing(logger, l, kind, secureTraffic)
				return clients.ServeTLS(l, gatewayTLS, kind)
			}})
			return nil
		}
		wrapTLS := func(l net.Listener) net.Listener { return wrapListener(l, b.tlsURL, client, "client", logger) }
		out = append(out, member.ClientListener{Listener: b.l, Serve: func(clients *etcdcompat.ClientServer, l net.Listener) error {
			logServing(logger, l, kind, insecureTraffic, secureTraffic)
			return clients.ServeMixed(l, wrapTLS, gatewayTLS, kind)
		}})
		return nil
	}
	kind := etcdcompat.ServeGRPCAndHTTP
	if cl.split {
		kind = etcdcompat.ServeGRPCOnly
	}
	for _, b := range cl.grpc {
		if err := add(b, kind); err != nil {
			return nil, err
		}
	}
	for _, b := range cl.http {
		if err := add(b, etcdcompat.ServeHTTPOnly); err != nil {
			return nil, err
		}
	}
	for _, b := range cl.metrics {
		out = append(out, member.ClientListener{Listener: b.l, Serve: func(clients *etcdcompat.ClientServer, l net.Listener) error {
			logger.Info("serving metrics", "address", l.Addr().String())
			return clients.ServeMetrics(l)
		}})
	}
	return out, nil
}

// etcd's words for how a client listener serves.
const (
	insecureTraffic = "serving client traffic insecurely; this is strongly discouraged!"
	secureTraffic   = "serving client traffic securely"
)

// logServing logs what etcd logs when a client listener starts serving
// (embed/serve.go), in its words and fields: "ready to serve client
// requests" once per listener, then a line per way it serves (msgs:
// plaintext, TLS, or both on a shared socket). Operators' scripts and
// etcd's own test framework wait for the first line; the member is
// ready (published to the cluster) by the time a listener is served.
func logServing(logger *slog.Logger, l net.Listener, kind etcdcompat.ListenerKind, msgs ...string) {
	traffic := "grpc+http"
	switch kind {
	case etcdcompat.ServeGRPCOnly:
		traffic = "grpc"
	case etcdcompat.ServeHTTPOnly:
		traffic = "http"
	}
	logger.Info("ready to serve client requests")
	for _, msg := range msgs {
		logger.Info(msg, "traffic", traffic, "address", l.Addr().String())
	}
}

func (cl clientListeners) close() {
	for _, bs := range [][]boundURL{cl.grpc, cl.http, cl.metrics} {
		for _, b := range bs {
			b.l.Close()
		}
	}
}
