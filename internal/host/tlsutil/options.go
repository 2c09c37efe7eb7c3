package tlsutil

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"
)

// HandshakeTimeout bounds a TLS handshake on a listener (etcd's
// tlsHandshakeTimeout).
const HandshakeTimeout = 10 * time.Second

// Options describe one side's TLS (the client listener or the peer
// listener and dialer), as etcd's TLSInfo does. The flag named in each
// comment is the client side's; the peer side's has the peer- prefix.
type Options struct {
	CertFile string // --cert-file
	KeyFile  string // --key-file
	// ClientCertFile and ClientKeyFile are presented when this member
	// dials as a client (--client-cert-file); empty uses CertFile/KeyFile.
	ClientCertFile string
	ClientKeyFile  string
	TrustedCAFile  string // --trusted-ca-file
	ClientCertAuth bool   // --client-cert-auth
	CRLFile        string // --client-crl-file
	// AllowedCNs and AllowedHostnames restrict which verified client
	// certificates are accepted (--peer-cert-allowed-cn,
	// --client-cert-allowed-hostname); mutually exclusive.
	AllowedCNs       []string
	AllowedHostnames []string
	// SkipClientSANVerify turns off the peer listener's check that a
	// client certificate's SANs match the connection's remote address
	// (--peer-skip-client-san-verification). Only CheckSAN listeners check.
	SkipClientSANVerify bool
	CipherSuites        []uint16 // --cipher-suites
	MinVersion          uint16   // --tls-min-version (0: TLS 1.2)
	MaxVersion          uint16   // --tls-max-version (0: Go's highest)
	// InsecureSkipVerify skips verifying the server's certificate when
	// dialing; set for self-signed (--auto-tls) material, as etcd does.
	InsecureSkipVerify bool
	// Logger receives certificate loading failures. Nil discards them.
	Logger *slog.Logger
}

// Empty reports whether no certificate is configured (etcd's TLSInfo.Empty).
func (o Options) Empty() bool { return o.CertFile == "" && o.KeyFile == "" }

// String describes the options the way etcd logs its TLSInfo.
func (o Options) String() string {
	return fmt.Sprintf("cert = %s, key = %s, client-cert=%s, client-key=%s, trusted-ca = %s, client-cert-auth = %v, crl-file = %s",
		o.CertFile, o.KeyFile, o.ClientCertFile, o.ClientKeyFile, o.TrustedCAFile, o.ClientCertAuth, o.CRLFile)
}

// TLS version names of --tls-min-version and --tls-max-version.
const (
	VersionDefault = ""
	Version12      = "TLS1.2"
	Version13      = "TLS1.3"
)

// ParseVersion turns a --tls-min-version/--tls-max-version value into a
// crypto/tls version; "" is 0 (Go decides).
func ParseVersion(name string) (uint16, error) {
	switch name {
	case VersionDefault:
		return 0, nil
	case Version12:
		return tls.VersionTLS12, nil
	case Version13:
		return tls.VersionTLS13, nil
	}
	return 0, fmt.Errorf("unexpected TLS version %q (must be one of: TLS1.2, TLS1.3)", name)
}

// ValidateVersions checks --tls-min-version, --tls-max-version and
// --cipher-suites together, with etcd's messages.
func ValidateVersions(minName, maxName string, cipherSuites []string) error {
	minV, err := ParseVersion(minName)
	if err != nil {
		return err
	}
	maxV, err := ParseVersion(maxName)
	if err != nil {
		return err
	}
	if maxV != 0 && minV > maxV {
		return fmt.Errorf("min version (%s) is greater than max version (%s)", minName, maxName)
	}
	if minV == tls.VersionTLS13 && len(cipherSuites) > 0 {
		return fmt.Errorf("cipher suites cannot be configured when only TLS1.3 is enabled")
	}
	return nil
}

// ParseCipherSuites resolves --cipher-suites names (Go's names, insecure
// ones included, and the two CHACHA20 aliases etcd accepts).
func ParseCipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	ids := make([]uint16, len(names))
	for i, name := range names {
		id, ok := cipherSuite(name)
		if !ok {
			return nil, fmt.Errorf("unexpected TLS cipher suite %q", name)
		}
		ids[i] = id
	}
	return ids, nil
}

func cipherSuite(name string) (uint16, bool) {
	for _, list := range [][]*tls.CipherSuite{tls.CipherSuites(), tls.InsecureCipherSuites()} {
		for _, c := range list {
			if c.Name == name {
				return c.ID, true
			}
		}
	}
	switch name {
	case "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305":
		return tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, true
	case "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305":
		return tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true
	}
	return 0, false
}
