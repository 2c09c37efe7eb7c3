package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/cluster/transport"
	"github.com/metastore-io/metastore/internal/host/tlsutil"
)

// tlsFlags are etcd's client and peer TLS flags (server/embed/config.go),
// with its names, defaults and validation messages.
type tlsFlags struct {
	client, peer           tlsutil.Options
	clientAutoTLS          bool
	peerAutoTLS            bool
	selfSignedCertValidity uint
	cipherSuites           []string
	minVersion, maxVersion string
}

func (t *tlsFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.client.CertFile, "cert-file", "", "Path to the client server TLS cert file.")
	fs.StringVar(&t.client.KeyFile, "key-file", "", "Path to the client server TLS key file.")
	fs.StringVar(&t.client.ClientCertFile, "client-cert-file", "", "Path to an explicit peer client TLS cert file otherwise cert file will be used when client auth is required.")
	fs.StringVar(&t.client.ClientKeyFile, "client-key-file", "", "Path to an explicit peer client TLS key file otherwise key file will be used when client auth is required.")
	fs.BoolVar(&t.client.ClientCertAuth, "client-cert-auth", false, "Enable client cert authentication.")
	fs.StringVar(&t.client.CRLFile, "client-crl-file", "", "Path to the client certificate revocation list file.")
	fs.StringSliceVar(&t.client.AllowedHostnames, "client-cert-allowed-hostname", nil, "Comma-separated list of allowed SAN hostnames for client cert authentication.")
	fs.StringVar(&t.client.TrustedCAFile, "trusted-ca-file", "", "Path to the client server TLS trusted CA cert file.")
	fs.BoolVar(&t.clientAutoTLS, "auto-tls", false, "Client TLS using generated certificates")
	fs.StringVar(&t.peer.CertFile, "peer-cert-file", "", "Path to the peer server TLS cert file.")
	fs.StringVar(&t.peer.KeyFile, "peer-key-file", "", "Path to the peer server TLS key file.")
	fs.StringVar(&t.peer.ClientCertFile, "peer-client-cert-file", "", "Path to an explicit peer client TLS cert file otherwise peer cert file will be used when client auth is required.")
	fs.StringVar(&t.peer.ClientKeyFile, "peer-client-key-file", "", "Path to an explicit peer client TLS key file otherwise peer key file will be used when client auth is required.")
	fs.BoolVar(&t.peer.ClientCertAuth, "peer-client-cert-auth", false, "Enable peer client cert authentication.")
	fs.StringVar(&t.peer.TrustedCAFile, "peer-trusted-ca-file", "", "Path to the peer server TLS trusted CA file.")
	fs.BoolVar(&t.peerAutoTLS, "peer-auto-tls", false, "Peer TLS using generated certificates")
	fs.UintVar(&t.selfSignedCertValidity, "self-signed-cert-validity", 1, "The validity period of the client and peer certificates, unit is year")
	fs.StringVar(&t.peer.CRLFile, "peer-crl-file", "", "Path to the peer certificate revocation list file.")
	fs.StringSliceVar(&t.peer.AllowedCNs, "peer-cert-allowed-cn", nil, "Comma-separated list of allowed CNs for inter-peer TLS authentication.")
	fs.StringSliceVar(&t.peer.AllowedHostnames, "peer-cert-allowed-hostname", nil, "Comma-separated list of allowed SAN hostnames for inter-peer TLS authentication.")
	fs.StringSliceVar(&t.cipherSuites, "cipher-suites", nil, "Comma-separated list of supported TLS cipher suites between client/server and peers (empty will be auto-populated by Go).")
	fs.BoolVar(&t.peer.SkipClientSANVerify, "peer-skip-client-san-verification", false, "Skip verification of SAN field in client certificate for peer connections.")
	fs.StringVar(&t.minVersion, "tls-min-version", tlsutil.Version12, "Minimum TLS version supported by etcd. Possible values: TLS1.2, TLS1.3.")
	fs.StringVar(&t.maxVersion, "tls-max-version", tlsutil.VersionDefault, "Maximum TLS version supported by etcd. Possible values: TLS1.2, TLS1.3 (empty defers to Go).")
}

// errMissingClientTLSForMetrics is etcd's refusal of an https metrics URL
// without a client certificate (embed.ErrMissingClientTLSInfoForMetricsURL).
var errMissingClientTLSForMetrics = errors.New("client TLS key/cert (--cert-file, --key-file) must be provided for metrics secure url")

// validate checks the TLS flags as etcd's Config.Validate does, and that
// every https URL has a certificate to serve (or --auto-tls/--peer-auto-tls).
func (t *tlsFlags) validate(o *options) error {
	if err := tlsutil.ValidateVersions(t.minVersion, t.maxVersion, t.cipherSuites); err != nil {
		return err
	}
	if _, err := tlsutil.ParseCipherSuites(t.cipherSuites); err != nil {
		return err
	}
	for _, side := range []struct {
		opts tlsutil.Options
		side string
	}{{t.client, "client"}, {t.peer, "peer"}} {
		if len(side.opts.AllowedCNs) > 0 && len(side.opts.AllowedHostnames) > 0 {
			return fmt.Errorf("AllowedCNs and AllowedHostnames are mutually exclusive (cns=%q, hostnames=%q)", side.opts.AllowedCNs, side.opts.AllowedHostnames)
		}
	}
	for _, u := range splitURLs(o.listenClientURLs) {
		if isTLSURL(u) && t.client.Empty() && !t.clientAutoTLS {
			return fmt.Errorf("TLS key/cert (--cert-file, --key-file) must be provided for client url %s with HTTPS scheme", u)
		}
	}
	for _, u := range o.listen.metricsURLs {
		// etcd serves https metrics with the client certificate
		// (embed.Etcd.createMetricsListener) and refuses without one.
		if isTLSURL(u) && t.client.Empty() && !t.clientAutoTLS {
			return errMissingClientTLSForMetrics
		}
	}
	for _, u := range splitURLs(o.listenPeerURLs) {
		if isTLSURL(u) && t.peer.Empty() && !t.peerAutoTLS {
			return fmt.Errorf("cannot listen on TLS for %s: KeyFile and CertFile are not presented", hostOf(u))
		}
	}
	if (t.clientAutoTLS || t.peerAutoTLS) && t.selfSignedCertValidity == 0 {
		return fmt.Errorf("selfSignedCertValidity is invalid,it should be greater than 0")
	}
	return nil
}

func isTLSURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "https" || u.Scheme == "unixs")
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return raw
}

// materials are the loaded client and peer TLS material; nil for a side
// without certificates.
type materials struct {
	client, peer *tlsutil.Material
}

// load builds the TLS material of both sides: generated certificates for
// --auto-tls/--peer-auto-tls (ignored when certificates are given, as
// etcd), the cipher suites and versions applied to both.
func (t *tlsFlags) load(o *options, logger *slog.Logger) (materials, error) {
	suites, err := tlsutil.ParseCipherSuites(t.cipherSuites)
	if err != nil {
		return materials{}, err
	}
	minV, _ := tlsutil.ParseVersion(t.minVersion) // validated
	maxV, _ := tlsutil.ParseVersion(t.maxVersion)
	var out materials
	for _, side := range []struct {
		opts    tlsutil.Options
		auto    bool
		name    string
		urls    string
		fixture string
		dst     **tlsutil.Material
	}{
		{t.client, t.clientAutoTLS, "client", o.listenClientURLs, "client", &out.client},
		{t.peer, t.peerAutoTLS, "peer", o.listenPeerURLs, "peer", &out.peer},
	} {
		opts := side.opts
		if side.auto {
			if !opts.Empty() {
				logger.Warn("ignoring " + side.name + " auto TLS since certs given")
			} else {
				var hosts []string
				for _, u := range splitURLs(side.urls) {
					hosts = append(hosts, hostOf(u))
				}
				self, err := tlsutil.SelfCert(logger, filepath.Join(o.dataDir, "fixtures", side.fixture), hosts, t.selfSignedCertValidity)
				if err != nil {
					return materials{}, fmt.Errorf("failed to get %s self-signed certs: %w", side.name, err)
				}
				opts.CertFile, opts.KeyFile = self.CertFile, self.KeyFile
				opts.ClientCertFile, opts.ClientKeyFile = self.ClientCertFile, self.ClientKeyFile
				opts.InsecureSkipVerify = true
			}
		}
		if opts.Empty() {
			continue
		}
		opts.CipherSuites, opts.MinVersion, opts.MaxVersion, opts.Logger = suites, minV, maxV, logger
		logger.Info("starting with "+side.name+" TLS", "tls-info", opts.String(), "cipher-suites", t.cipherSuites)
		m, err := tlsutil.New(opts)
		if err != nil {
			return materials{}, fmt.Errorf("%s TLS: %w", side.name, err)
		}
		*side.dst = m
	}
	return out, nil
}

// wrapListener serves TLS on l when the URL is https (refusals logged on
// the endpoint's name); plain http URLs are served as they are, with
// etcd's warnings when certificates are configured anyway.
func wrapListener(l net.Listener, rawURL string, m *tlsutil.Material, endpoint string, logger *slog.Logger) net.Listener {
	if !isTLSURL(rawURL) {
		if m != nil {
			// etcd's warnings, worded per endpoint as etcd words them.
			if endpoint == "peer" {
				logger.Warn("scheme is HTTP while key and cert files are present; ignoring key and cert files", "peer-url", rawURL)
				if m.Options().ClientCertAuth {
					logger.Warn("scheme is HTTP while --peer-client-cert-auth is enabled; ignoring client cert auth for this URL", "peer-url", rawURL)
				}
			} else {
				logger.Warn("scheme is http or unix while key and cert files are present; ignoring key and cert files", "client-url", rawURL)
				if m.Options().ClientCertAuth {
					logger.Warn("scheme is http or unix while --client-cert-auth is enabled; ignoring client cert auth for this URL", "client-url", rawURL)
				}
			}
		}
		return l
	}
	return tlsutil.NewListener(l, m, tlsutil.ListenerConfig{Endpoint: endpoint, CheckSAN: endpoint == "peer", Logger: logger})
}

// peerClientTLS is how the member dials its peers: with the peer
// material, or nil (http only) without it.
func peerClientTLS(m *tlsutil.Material) transport.ClientTLS {
	if m == nil {
		return nil
	}
	return m
}
