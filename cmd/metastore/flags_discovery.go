package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// discoveryFlags are etcd's bootstrap-by-discovery flags: v2 discovery
// (--discovery, a discovery.etcd.io style URL), v3 discovery
// (--discovery-endpoints and --discovery-token, an etcd cluster used as the
// registry) and DNS SRV discovery (--discovery-srv). MetaStore bootstraps
// only from --initial-cluster: the flags are parsed and checked as etcd
// checks them, and a member that would have to bootstrap through discovery
// refuses to start with a message that says so. A member that already has
// its data directory ignores them, as etcd does on a restart.
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

// refuseUnbootstrapped refuses to start a member that would need
// discovery to find its cluster: one without a data directory yet.
func (d *discoveryFlags) refuseUnbootstrapped(dataDir string) error {
	if !d.requested() {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dataDir, "member")); err == nil {
		return nil // restart: etcd ignores discovery too
	}
	method := "--discovery"
	switch {
	case d.srv != "":
		method = "--discovery-srv"
	case len(d.endpoints) > 0:
		method = "--discovery-endpoints"
	}
	return fmt.Errorf("%s: MetaStore does not bootstrap through etcd discovery; list the members with --initial-cluster (and --initial-cluster-state) instead", method)
}
