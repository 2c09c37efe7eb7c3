package tlsutil

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
)

// CertIdentity is what the allowed-name checks and auth read from a
// certificate: the subject's Common Name and the SANs.
type CertIdentity struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
}

// Identity parses a DER certificate and returns its identity. Malformed
// input is an error, never a panic.
func Identity(der []byte) (CertIdentity, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return CertIdentity{}, fmt.Errorf("parse certificate: %w", err)
	}
	return IdentityOf(cert), nil
}

// IdentityOf returns a parsed certificate's identity.
func IdentityOf(cert *x509.Certificate) CertIdentity {
	return CertIdentity{CommonName: cert.Subject.CommonName, DNSNames: cert.DNSNames, IPs: cert.IPAddresses}
}

// errClientCertAuth is etcd's refusal of a verified certificate whose
// names are not allowed.
var errClientCertAuth = errors.New("client certificate authentication failed")

// allowedNames returns the check of --peer-cert-allowed-cn /
// --*-cert-allowed-hostname, or nil when neither restricts.
func allowedNames(cns, hostnames []string) func(*x509.Certificate) bool {
	switch {
	case len(cns) > 0:
		return func(c *x509.Certificate) bool { return slices.Contains(cns, c.Subject.CommonName) }
	case len(hostnames) > 0:
		return func(c *x509.Certificate) bool {
			for _, h := range hostnames {
				if c.VerifyHostname(h) == nil {
					return true
				}
			}
			return false
		}
	}
	return nil
}

// verifyAllowed is a tls.Config.VerifyPeerCertificate accepting the
// handshake when the leaf of any verified chain passes allowed.
func verifyAllowed(allowed func(*x509.Certificate) bool) func([][]byte, [][]*x509.Certificate) error {
	return func(_ [][]byte, chains [][]*x509.Certificate) error {
		for _, chain := range chains {
			if len(chain) > 0 && allowed(chain[0]) {
				return nil
			}
		}
		return errClientCertAuth
	}
}

// revokedSerials is a parsed CRL: the revoked serial numbers' bytes.
type revokedSerials map[string]struct{}

func parseCRL(contents [][]byte) (revokedSerials, error) {
	list, err := x509.ParseRevocationList(contents[0])
	if err != nil {
		return nil, err
	}
	out := make(revokedSerials, len(list.RevokedCertificateEntries))
	for _, e := range list.RevokedCertificateEntries {
		if e.SerialNumber != nil {
			out[string(e.SerialNumber.Bytes())] = struct{}{}
		}
	}
	return out, nil
}

// check refuses a chain with a revoked certificate, in etcd's words.
func (r revokedSerials) check(chain []*x509.Certificate) error {
	for _, c := range chain {
		serial := string(c.SerialNumber.Bytes())
		if _, ok := r[serial]; ok {
			return fmt.Errorf("transport: certificate serial %x revoked", serial)
		}
	}
	return nil
}

// checkCertSAN is etcd's peer-listener check that a client certificate
// with SANs names the address the connection comes from: an IP SAN
// equal to it, or a DNS SAN that resolves to it (or that its reverse
// lookup yields).
func checkCertSAN(ctx context.Context, cert *x509.Certificate, remoteAddr string) error {
	if len(cert.IPAddresses) == 0 && len(cert.DNSNames) == 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return err
	}
	if len(cert.IPAddresses) > 0 {
		ipErr := cert.VerifyHostname(host)
		if ipErr == nil {
			return nil
		}
		if len(cert.DNSNames) == 0 {
			return ipErr
		}
	}
	ok, lookupErr := hostInDNSNames(ctx, host, cert.DNSNames)
	if ok {
		return nil
	}
	suffix := ""
	if lookupErr != nil {
		suffix = " (" + lookupErr.Error() + ")"
	}
	return fmt.Errorf("tls: %q does not match any of DNSNames %q"+suffix, host, cert.DNSNames)
}

func hostInDNSNames(ctx context.Context, host string, dnsNames []string) (bool, error) {
	var names, wildcards []string
	for _, d := range dnsNames {
		if strings.HasPrefix(d, "*.") {
			wildcards = append(wildcards, d[1:])
		} else {
			names = append(names, d)
		}
	}
	reverse, err := net.DefaultResolver.LookupAddr(ctx, host)
	for _, name := range reverse {
		name = strings.TrimSuffix(name, ".")
		if slices.Contains(names, name) {
			return true, nil
		}
		for _, wc := range wildcards {
			if strings.HasSuffix(name, wc) {
				return true, nil
			}
		}
	}
	for _, d := range names {
		addrs, lerr := net.DefaultResolver.LookupHost(ctx, d)
		if lerr != nil {
			err = lerr
			continue
		}
		if slices.Contains(addrs, host) {
			return true, nil
		}
	}
	return false, err
}
