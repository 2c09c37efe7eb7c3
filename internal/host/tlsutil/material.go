package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
)

// Material is one side's certificates, read through caches that follow
// the files on disk, and the tls.Configs built from them. Safe for
// concurrent use.
type Material struct {
	opts       Options
	log        *slog.Logger
	leaf       *fileCache[*tls.Certificate]
	clientLeaf *fileCache[*tls.Certificate] // leaf when ClientCertFile is empty
	cas        *fileCache[*x509.CertPool]   // nil without TrustedCAFile
	crl        *fileCache[revokedSerials]   // nil without CRLFile
	allowed    func(*x509.Certificate) bool // nil: any verified certificate
}

// New checks opts as etcd's TLSInfo.baseConfig does (the key pair and the
// CA bundle must load now) and returns the material.
func New(opts Options) (*Material, error) {
	if opts.KeyFile == "" || opts.CertFile == "" {
		return nil, fmt.Errorf("KeyFile and CertFile must both be present[key: %v, cert: %v]", opts.KeyFile, opts.CertFile)
	}
	if (opts.ClientKeyFile == "") != (opts.ClientCertFile == "") {
		return nil, fmt.Errorf("ClientKeyFile and ClientCertFile must both be present or both absent: key: %v, cert: %v]", opts.ClientKeyFile, opts.ClientCertFile)
	}
	if len(opts.AllowedCNs) > 0 && len(opts.AllowedHostnames) > 0 {
		return nil, fmt.Errorf("AllowedCNs and AllowedHostnames are mutually exclusive (cns=%q, hostnames=%q)", opts.AllowedCNs, opts.AllowedHostnames)
	}
	m := &Material{opts: opts, log: opts.Logger, allowed: allowedNames(opts.AllowedCNs, opts.AllowedHostnames)}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.leaf = newFileCache(parseKeyPair, opts.CertFile, opts.KeyFile)
	m.clientLeaf = m.leaf
	if opts.ClientCertFile != "" {
		m.clientLeaf = newFileCache(parseKeyPair, opts.ClientCertFile, opts.ClientKeyFile)
	}
	if opts.TrustedCAFile != "" {
		m.cas = newFileCache(parseCertPool, opts.TrustedCAFile)
	}
	if opts.CRLFile != "" {
		m.crl = newFileCache(parseCRL, opts.CRLFile)
	}
	if _, err := m.leaf.get(); err != nil {
		return nil, err
	}
	if _, err := m.clientLeaf.get(); err != nil {
		return nil, err
	}
	if m.cas != nil {
		if _, err := m.cas.get(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Options returns what the material was built from.
func (m *Material) Options() Options { return m.opts }

func parseKeyPair(contents [][]byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

func parseCertPool(contents [][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(contents[0]) {
		return nil, errors.New("no certificate found in the trusted CA file")
	}
	return pool, nil
}

// base is the part of every config: versions, suites, the allowed-name
// check and the certificate callbacks that follow the files.
func (m *Material) base() *tls.Config {
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		MaxVersion:   m.opts.MaxVersion,
		CipherSuites: m.opts.CipherSuites,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return m.loadLeaf(m.leaf, "peer", m.opts.CertFile, m.opts.KeyFile)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			certFile, keyFile := m.opts.CertFile, m.opts.KeyFile
			if m.opts.ClientCertFile != "" {
				certFile, keyFile = m.opts.ClientCertFile, m.opts.ClientKeyFile
			}
			return m.loadLeaf(m.clientLeaf, "client", certFile, keyFile)
		},
	}
	if m.opts.MinVersion != 0 {
		cfg.MinVersion = m.opts.MinVersion
	}
	if m.allowed != nil {
		cfg.VerifyPeerCertificate = verifyAllowed(m.allowed)
	}
	return cfg
}

// loadLeaf returns the current key pair, logging a failure as etcd does.
func (m *Material) loadLeaf(c *fileCache[*tls.Certificate], kind, certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := c.get()
	switch {
	case errors.Is(err, os.ErrNotExist):
		m.log.Warn("failed to find "+kind+" cert files", "cert-file", certFile, "key-file", keyFile, "error", err)
	case err != nil:
		m.log.Warn("failed to create "+kind+" certificate", "cert-file", certFile, "key-file", keyFile, "error", err)
	}
	return cert, err
}

// ServerConfig is the listener's configuration. Client certificates are
// required and verified when a trusted CA file is given or ClientCertAuth
// is set; the CA pool is the one on disk at each handshake.
func (m *Material) ServerConfig() *tls.Config {
	cfg := m.base()
	cfg.NextProtos = []string{"h2"}
	if m.opts.TrustedCAFile != "" || m.opts.ClientCertAuth {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	if m.cas != nil {
		cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			pool, err := m.cas.get()
			if err != nil {
				m.log.Warn("failed to load trusted CA file", "trusted-ca-file", m.opts.TrustedCAFile, "error", err)
				return nil, err
			}
			c := cfg.Clone()
			c.GetConfigForClient = nil
			c.ClientCAs = pool
			return c, nil
		}
	}
	return cfg
}

// ClientConfig is a configuration for one outgoing connection (peer
// dialing, and the gateway's connection to its own listener), built from
// the files as they are now. serverName empty verifies the dialled host.
func (m *Material) ClientConfig(serverName string) (*tls.Config, error) {
	cfg := m.base()
	cfg.ServerName = serverName
	cfg.InsecureSkipVerify = m.opts.InsecureSkipVerify
	if m.cas != nil {
		pool, err := m.cas.get()
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// checkRevoked refuses a connection whose peer chain has a revoked
// certificate; nil without a CRL file. The CRL is the one on disk now.
func (m *Material) checkRevoked(chain []*x509.Certificate) error {
	if m.crl == nil || len(chain) == 0 {
		return nil
	}
	revoked, err := m.crl.get()
	if err != nil {
		return err
	}
	return revoked.check(chain)
}

// GatewayConfig is how the JSON gateway dials its own TLS listener, as
// etcd's: the server's certificate presented as the client's, the
// server's not verified (it is this process).
func (m *Material) GatewayConfig() (*tls.Config, error) {
	cfg := m.base()
	cfg.InsecureSkipVerify = true
	cfg.VerifyPeerCertificate = nil // nothing verified to check names of
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return m.loadLeaf(m.leaf, "client", m.opts.CertFile, m.opts.KeyFile)
	}
	return cfg, nil
}
