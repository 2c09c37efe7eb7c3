package framework

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority the tests create, writing its
// certificate to CertFile.
type CA struct {
	Name     string
	Cert     *x509.Certificate
	CertFile string
	key      crypto.Signer
	dir      string
}

// CertPair is an issued certificate and its key, as PEM files.
type CertPair struct {
	Cert     *x509.Certificate
	CertFile string
	KeyFile  string
}

// CertSpec says what to put in an issued certificate.
type CertSpec struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	// NotAfter defaults to a day from now; set it in the past for an
	// expired certificate.
	NotBefore, NotAfter time.Time
}

// loopbackSANs are the SANs of member certificates: every address the
// tests dial and every address a peer connection comes from.
var loopbackSANs = CertSpec{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}

// NewCA creates a self-signed CA named name, writing name-ca.crt to dir.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", name, err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"metastore-e2e"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Name: name, Cert: cert, key: key, dir: dir, CertFile: filepath.Join(dir, name+"-ca.crt")}
	if err := writePEMFile(ca.CertFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue signs a certificate usable for both server and client
// authentication (as kubeadm's etcd peer certificates), writing
// file.crt and file.key to the CA's directory.
func (ca *CA) Issue(file string, spec CertSpec) (*CertPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if spec.NotBefore.IsZero() {
		spec.NotBefore = now.Add(-time.Hour)
	}
	if spec.NotAfter.IsZero() {
		spec.NotAfter = now.Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.CommonName, Organization: []string{"metastore-e2e"}},
		NotBefore:    spec.NotBefore,
		NotAfter:     spec.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("issue %s: %w", file, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	pair := &CertPair{Cert: cert, CertFile: filepath.Join(ca.dir, file+".crt"), KeyFile: filepath.Join(ca.dir, file+".key")}
	if err := writePEMFile(pair.KeyFile, "PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	if err := writePEMFile(pair.CertFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return pair, nil
}

// WriteCRL writes to path a CRL of this CA revoking the given
// certificates (none: an empty CRL).
func (ca *CA) WriteCRL(path string, revoked ...*CertPair) error {
	entries := make([]x509.RevocationListEntry, len(revoked))
	for i, r := range revoked {
		entries[i] = x509.RevocationListEntry{SerialNumber: r.Cert.SerialNumber, RevocationTime: time.Now().Add(-time.Minute)}
	}
	number, err := newSerial()
	if err != nil {
		return err
	}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{
		Number:                    number,
		ThisUpdate:                time.Now().Add(-time.Minute),
		NextUpdate:                time.Now().Add(24 * time.Hour),
		RevokedCertificateEntries: entries,
	}, ca.Cert, ca.key)
	if err != nil {
		return fmt.Errorf("CRL of %s: %w", ca.Name, err)
	}
	// DER, as etcd reads it (x509.ParseRevocationList; PEM is "malformed").
	return writeFileAtomic(path, der)
}

// PKI is the set of certificates the TLS tests use, all under Dir.
type PKI struct {
	Dir string
	// CA signs everything below except Foreign; OtherCA is unrelated.
	CA, OtherCA *CA
	// Member is every member's certificate (CN "member", loopback SANs).
	Member *CertPair
	// Client is a client certificate (CN "client"); Root has CN "root".
	Client, Root *CertPair
	// Revoked is a valid client certificate listed in CRLFile.
	Revoked *CertPair
	// Foreign has loopback SANs and CN "member" but is signed by OtherCA.
	Foreign *CertPair
	// Intruder is signed by CA, loopback SANs, CN "intruder": a peer
	// certificate outside --peer-cert-allowed-cn=member.
	Intruder *CertPair
	// CRLFile revokes Revoked; EmptyCRLFile revokes nothing.
	CRLFile, EmptyCRLFile string
}

// NewPKI generates a PKI in dir.
func NewPKI(dir string) (*PKI, error) {
	p := &PKI{Dir: dir}
	var err error
	if p.CA, err = NewCA(dir, "e2e"); err != nil {
		return nil, err
	}
	if p.OtherCA, err = NewCA(dir, "other"); err != nil {
		return nil, err
	}
	member := loopbackSANs
	member.CommonName = "member"
	issue := []struct {
		dst  **CertPair
		ca   *CA
		file string
		spec CertSpec
	}{
		{&p.Member, p.CA, "member", member},
		{&p.Client, p.CA, "client", CertSpec{CommonName: "client"}},
		{&p.Root, p.CA, "root", CertSpec{CommonName: "root"}},
		{&p.Revoked, p.CA, "revoked", CertSpec{CommonName: "revoked"}},
		{&p.Foreign, p.OtherCA, "foreign", member},
		{&p.Intruder, p.CA, "intruder", withCN(loopbackSANs, "intruder")},
	}
	for _, i := range issue {
		if *i.dst, err = i.ca.Issue(i.file, i.spec); err != nil {
			return nil, err
		}
	}
	p.CRLFile = filepath.Join(dir, "e2e.crl")
	if err := p.CA.WriteCRL(p.CRLFile, p.Revoked); err != nil {
		return nil, err
	}
	p.EmptyCRLFile = filepath.Join(dir, "e2e-empty.crl")
	if err := p.CA.WriteCRL(p.EmptyCRLFile); err != nil {
		return nil, err
	}
	return p, nil
}

// MemberSpec is the spec of a member certificate with the given CN.
func MemberSpec(cn string) CertSpec { return withCN(loopbackSANs, cn) }

func withCN(s CertSpec, cn string) CertSpec {
	s.CommonName = cn
	return s
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// writePEMFile writes a PEM file atomically.
func writePEMFile(path, blockType string, der []byte) error {
	return writeFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}))
}

// writeFileAtomic writes through a temporary file and a rename, so a
// server reloading the file never reads half of it.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReplaceFile replaces dst with the contents of the srcs, concatenated,
// atomically: how the rotation tests change certificates, CA bundles and
// CRLs under a running server.
func ReplaceFile(dst string, srcs ...string) error {
	var data []byte
	for _, src := range srcs {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		data = append(data, b...)
	}
	return writeFileAtomic(dst, data)
}
