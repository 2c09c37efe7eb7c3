package tlsutil

import (
	"crypto/x509"
	"net"
	"os"
	"testing"

	"github.com/metastore-io/metastore/test/framework"
)

func TestIdentity(t *testing.T) {
	pki := testPKI(t)
	id, err := Identity(pki.Member.Cert.Raw)
	if err != nil {
		t.Fatal(err)
	}
	if id.CommonName != "member" || len(id.DNSNames) != 1 || id.DNSNames[0] != "localhost" || len(id.IPs) != 2 || !id.IPs[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Fatalf("identity %+v", id)
	}
	if _, err := Identity([]byte("not a certificate")); err == nil {
		t.Fatal("garbage parsed")
	}
}

func TestAllowedNames(t *testing.T) {
	pki := testPKI(t)
	if allowedNames(nil, nil) != nil {
		t.Fatal("no restriction should be nil")
	}
	byCN := allowedNames([]string{"a", "member"}, nil)
	if !byCN(pki.Member.Cert) || byCN(pki.Client.Cert) {
		t.Fatal("CN check")
	}
	byHost := allowedNames(nil, []string{"127.0.0.1"})
	if !byHost(pki.Member.Cert) || byHost(pki.Client.Cert) {
		t.Fatal("hostname check")
	}
	verify := verifyAllowed(byCN)
	if err := verify(nil, [][]*x509.Certificate{{pki.Client.Cert}, {pki.Member.Cert}}); err != nil {
		t.Fatalf("any verified chain with an allowed leaf passes: %v", err)
	}
	if err := verify(nil, nil); err == nil || err.Error() != "client certificate authentication failed" {
		t.Fatalf("no chain: %v", err)
	}
}

// FuzzIdentity feeds arbitrary bytes to the certificate identity
// extraction and the allowed-name checks: never a panic, and a parsed
// certificate's identity is the one its fields say.
func FuzzIdentity(f *testing.F) {
	pki, err := framework.NewPKI(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range []*framework.CertPair{pki.Member, pki.Client, pki.Foreign} {
		f.Add(p.Cert.Raw)
	}
	f.Add(pki.CA.Cert.Raw)
	f.Add([]byte{0x30, 0x82, 0x01})
	f.Fuzz(func(t *testing.T, der []byte) {
		id, err := Identity(der)
		if err != nil {
			return
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatalf("Identity parsed what x509 refuses: %v", err)
		}
		if id.CommonName != cert.Subject.CommonName || len(id.DNSNames) != len(cert.DNSNames) || len(id.IPs) != len(cert.IPAddresses) {
			t.Fatalf("identity %+v differs from the certificate", id)
		}
		allowedNames([]string{id.CommonName}, nil)(cert)
		for _, h := range append(append([]string{}, id.DNSNames...), "localhost", "127.0.0.1") {
			allowedNames(nil, []string{h})(cert)
		}
		_ = revokedSerials{string(cert.SerialNumber.Bytes()): {}}.check([]*x509.Certificate{cert})
	})
}

// FuzzParseCRL: a CRL file's bytes never panic the parser or the check.
func FuzzParseCRL(f *testing.F) {
	pki, err := framework.NewPKI(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range []string{pki.CRLFile, pki.EmptyCRLFile} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte("-----BEGIN X509 CRL-----\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseCRL([][]byte{b})
		if err != nil {
			return
		}
		_ = r.check(nil)
	})
}
