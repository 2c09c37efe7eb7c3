package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// SelfCert returns options for --auto-tls / --peer-auto-tls: the
// self-signed pair in dir (cert.pem, key.pem), created on first use for
// hosts (host:port of the listen URLs) and valid validityYears
// (--self-signed-cert-validity). As etcd, an existing pair is reused, and
// peers are not verified (InsecureSkipVerify).
func SelfCert(logger *slog.Logger, dir string, hosts []string, validityYears uint) (Options, error) {
	if validityYears == 0 {
		return Options{}, errors.New("selfSignedCertValidity is invalid,it should be greater than 0")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Options{}, fmt.Errorf("create cert directory: %w", err)
	}
	certPath, err := filepath.Abs(filepath.Join(dir, "cert.pem"))
	if err != nil {
		return Options{}, err
	}
	keyPath, err := filepath.Abs(filepath.Join(dir, "key.pem"))
	if err != nil {
		return Options{}, err
	}
	opts := Options{CertFile: certPath, KeyFile: keyPath, ClientCertFile: certPath, ClientKeyFile: keyPath, InsecureSkipVerify: true}
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	if certErr == nil && keyErr == nil {
		return opts, nil
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return Options{}, fmt.Errorf("generate serial number: %w", err)
	}
	now := time.Now()
	tmpl := x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"etcd"}},
		NotBefore:             now,
		NotAfter:              now.Add(time.Duration(validityYears) * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	if logger != nil {
		logger.Warn("automatically generate certificates", "certificate-validity-bound-not-after", tmpl.NotAfter)
	}
	for _, host := range hosts {
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			h = host
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		return Options{}, fmt.Errorf("generate ECDSA key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, &tmpl, &key.PublicKey, key)
	if err != nil {
		return Options{}, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Options{}, fmt.Errorf("marshal key: %w", err)
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return Options{}, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der, 0o644); err != nil {
		return Options{}, err
	}
	if logger != nil {
		logger.Info("created cert file", "path", certPath)
		logger.Info("created key file", "path", keyPath)
	}
	return opts, nil
}

func writePEM(path, blockType string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
