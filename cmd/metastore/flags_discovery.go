package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/metastore-io/metastore/internal/cluster/membership"
	"github.com/metastore-io/metastore/internal/cluster/v3discovery"
)

// discoveryFlags are etcd's bootstrap-by-discovery flags: v2 discovery
// (--discovery, a discovery.etcd.io style URL), v3 discovery
// (--discovery-endpoints and --discovery-token, an etcd cluster used as the
// registry) and DNS SRV discovery (--discovery-srv). MetaStore bootstraps
// from --initial-cluster or through v3 discovery (bootstrap); the flags
// are parsed and checked as etcd checks them, and a member that would
// have to bootstrap through v2 or DNS SRV discovery refuses to start with
// a message that says so. A member that already has its data directory
// ignores them, as etcd does on a restart.
type discoveryFlags struct {
	url               string
	proxy             string
	srv               string
	srvName           string
	token             string
	endpoints         []string
	dialTimeout       time.Duration
	requestTimeout    time.Duration
	keepAliveTime     time.Duration
	keepAliveTimeout  time.Duration
	insecure          bool
	skipTLSVerify     bool
	cert, key, cacert string
	user, password    string
	fallback          string
}

func (o *options) registerDiscovery(fs *pflag.FlagSet) {
	d := &o.discovery
	fs.StringVar(&d.url, "discovery", "", "Discovery URL used to bootstrap the cluster for v2 discovery. Will be deprecated in v3.7, and be decommissioned in v3.8.")
	fs.StringVar(&d.token, "discovery-token", "", "V3 discovery: discovery token for the etcd cluster to be bootstrapped.")
	fs.StringSliceVar(&d.endpoints, "discovery-endpoints", nil, "V3 discovery: List of gRPC endpoints of the discovery service.")
	fs.DurationVar(&d.dialTimeout, "discovery-dial-timeout", 2*time.Second, "V3 discovery: dial timeout for client connections.")
	fs.DurationVar(&d.requestTimeout, "discovery-request-timeout", 5*time.Second, "V3 discovery: timeout for discovery requests (excluding dial timeout).")
	fs.DurationVar(&d.keepAliveTime, "discovery-keepalive-time", 2*time.Second, "V3 discovery: keepalive time for client connections.")
	fs.DurationVar(&d.keepAliveTimeout, "discovery-keepalive-timeout", 6*time.Second, "V3 discovery: keepalive timeout for client connections.")
	fs.BoolVar(&d.insecure, "discovery-insecure-transport", true, "V3 discovery: disable transport security for client connections.")
	fs.BoolVar(&d.skipTLSVerify, "discovery-insecure-skip-tls-verify", false, "V3 discovery: skip server certificate verification (CAUTION: this option should be enabled only for testing purposes).")
	fs.StringVar(&d.cert, "discovery-cert", "", "V3 discovery: identify secure client using this TLS certificate file.")
	fs.StringVar(&d.key, "discovery-key", "", "V3 discovery: identify secure client using this TLS key file.")
	fs.StringVar(&d.cacert, "discovery-cacert", "", "V3 discovery: verify certificates of TLS-enabled secure servers using this CA bundle.")
	fs.StringVar(&d.user, "discovery-user", "", "V3 discovery: username[:password] for authentication (prompt if password is not supplied).")
	fs.StringVar(&d.password, "discovery-password", "", "V3 discovery: password for authentication (if this option is used, --user option shouldn't include password).")
	fs.Var(newChoiceValue(&d.fallback, "exit", []string{"exit", "proxy"}), "discovery-fallback", "Expected behavior ('exit') when discovery services fails. Note that v2 proxy is removed.")
	fs.StringVar(&d.proxy, "discovery-proxy", "", "HTTP proxy to use for traffic to discovery service. Will be deprecated in v3.7, and be decommissioned in v3.8.")
	fs.StringVar(&d.srv, "discovery-srv", "", "DNS srv domain used to bootstrap the cluster.")
	fs.StringVar(&d.srvName, "discovery-srv-name", "", "Suffix to the dns srv name queried when bootstrapping.")
}

// errConflictBootstrapFlags is etcd's message for more than one way of
// bootstrapping.
var errConflictBootstrapFlags = errors.New("multiple discovery or bootstrap flags are set. " +
	"Choose one of \"initial-cluster\", \"discovery\", \"discovery-endpoints\" or \"discovery-srv\"")

// requested reports whether a discovery method is configured.
func (d *discoveryFlags) requested() bool {
	return d.url != "" || d.srv != "" || len(uniqueStrings(d.endpoints)) > 0
}

// validate checks the flags as etcd's config validation does.
func (d *discoveryFlags) validate(initialClusterSet bool) error {
	if d.fallback == "proxy" {
		return fmt.Errorf("v2 proxy is deprecated, and --discovery-fallback can't be configured as %q", "proxy")
	}
	n := 0
	for _, set := range []bool{d.url != "", initialClusterSet, d.srv != "", len(uniqueStrings(d.endpoints)) > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errConflictBootstrapFlags
	}
	v3 := len(d.endpoints) > 0 || d.token != "" || d.cert != "" || d.key != "" || d.cacert != "" || d.user != "" || d.password != ""
	if d.proxy != "" && v3 {
		return errors.New("both v2 discovery settings (discovery, discovery-proxy) " +
			"and v3 discovery settings (discovery-token, discovery-endpoints, discovery-cert, " +
			"discovery-key, discovery-cacert, discovery-user, discovery-password) are set")
	}
	if (d.token != "") != (len(d.endpoints) > 0) {
		return errors.New("both --discovery-token and --discovery-endpoints must be set")
	}
	for _, ep := range d.endpoints {
		if strings.TrimSpace(ep) == "" {
			return errors.New("--discovery-endpoints must not contain empty endpoints")
		}
	}
	return nil
}

// bootstrap resolves the initial cluster of a new member configured for
// discovery: through the registry for v3 discovery (--discovery-endpoints
// and --discovery-token), which then also gives the cluster token, as
// etcd derives member IDs from the discovery token. v2 discovery and DNS
// SRV discovery are refused with a message that says so. A member that
// already has its data directory ignores discovery, as etcd does on a
// restart. ctx ends the wait for the other members.
func (d *discoveryFlags) bootstrap(ctx context.Context, o *options, logger *slog.Logger) error {
	if !d.requested() {
		return nil
	}
	if _, err := os.Stat(filepath.Join(o.dataDir, "member")); err == nil {
		logger.Warn("discovery token is ignored since cluster already initialized; valid logs are found", "data-dir", o.dataDir)
		return nil
	}
	switch {
	case d.srv != "":
		return errors.New("--discovery-srv: MetaStore does not bootstrap through DNS SRV discovery; use --discovery-endpoints and --discovery-token, or list the members with --initial-cluster")
	case d.url != "":
		return errors.New("--discovery: MetaStore does not bootstrap through v2 discovery (deprecated in etcd 3.6); use --discovery-endpoints and --discovery-token, or list the members with --initial-cluster")
	}
	cfg, err := d.config(logger)
	if err != nil {
		return err
	}
	peerURLs := splitURLs(o.initialAdvertisePeerURLs)
	self := make([]string, 0, len(peerURLs))
	for _, u := range peerURLs {
		self = append(self, o.name+"="+u)
	}
	slices.Sort(self) // as etcd's URLsMap.String()
	logger.Info("Bootstrapping cluster using v3 discovery.")
	id := membership.MemberID(peerURLs, d.token, nil)
	cluster, err := v3discovery.JoinCluster(ctx, cfg, id, strings.Join(self, ","))
	if err != nil {
		logger.Warn("failed to bootstrap; discovery token was already used", "discovery-token", d.token, "error", err)
		logger.Warn("do not reuse discovery token; generate a new one to bootstrap a cluster")
		return fmt.Errorf("failed to join discovery cluster (%w)", err)
	}
	members, err := membership.ParseInitialCluster(cluster)
	if err != nil {
		return fmt.Errorf("discovery cluster %s: %w", cluster, err)
	}
	seen := map[string]bool{}
	for _, m := range members {
		for _, u := range m.PeerURLs {
			if seen[u] {
				return fmt.Errorf("discovery cluster %s has duplicate url", cluster)
			}
			seen[u] = true
		}
	}
	o.initialCluster, o.initialClusterToken = cluster, d.token
	return nil
}

// config is the registry client's configuration from the flags, as
// etcd's clientv3.NewClientConfig builds it.
func (d *discoveryFlags) config(logger *slog.Logger) (v3discovery.Config, error) {
	cfg := v3discovery.Config{
		Token:          d.token,
		RequestTimeout: d.requestTimeout,
		Logger:         logger,
		Client: clientv3.Config{
			Endpoints:            uniqueStrings(d.endpoints),
			DialTimeout:          d.dialTimeout,
			DialKeepAliveTime:    d.keepAliveTime,
			DialKeepAliveTimeout: d.keepAliveTimeout,
			Username:             d.user,
			Password:             d.password,
			Logger:               zap.NewNop(),
		},
	}
	if d.password == "" {
		// --discovery-user=name:password
		cfg.Client.Username, cfg.Client.Password, _ = strings.Cut(d.user, ":")
	}
	var tlsCfg *tls.Config
	if d.cert != "" || d.key != "" || d.cacert != "" {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		if d.cert != "" || d.key != "" {
			pair, err := tls.LoadX509KeyPair(d.cert, d.key)
			if err != nil {
				return cfg, fmt.Errorf("--discovery-cert/--discovery-key: %w", err)
			}
			tlsCfg.Certificates = []tls.Certificate{pair}
		}
		if d.cacert != "" {
			pem, err := os.ReadFile(d.cacert)
			if err != nil {
				return cfg, fmt.Errorf("--discovery-cacert: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("--discovery-cacert %s: no certificate found", d.cacert)
			}
			tlsCfg.RootCAs = pool
		}
	}
	if tlsCfg == nil && !d.insecure {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if d.skipTLSVerify {
		if tlsCfg == nil {
			tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tlsCfg.InsecureSkipVerify = true
	}
	cfg.Client.TLS = tlsCfg
	return cfg, nil
}
