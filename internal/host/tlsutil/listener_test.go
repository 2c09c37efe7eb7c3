package tlsutil

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
	"github.com/metastore-io/metastore/test/testutil"
)

// syncBuffer collects log output written from handshake goroutines.
type syncBuffer struct{ testutil.SyncBuffer }

// waitFor reports whether the log comes to contain text within 10 s: the
// server logs a refusal on its handshake goroutine, which may run after
// the client already saw the handshake fail.
func (b *syncBuffer) waitFor(text string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), text) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	return true
}

// testServer serves NewListener on a loopback port, greeting every
// accepted connection with "hello\n".
type testServer struct {
	addr string
	log  *syncBuffer
}

func startServer(t *testing.T, m *Material, cfg ListenerConfig) *testServer {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{addr: raw.Addr().String(), log: &syncBuffer{}}
	cfg.Logger = slog.New(slog.NewJSONHandler(s.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if cfg.Endpoint == "" {
		cfg.Endpoint = "client"
	}
	l := NewListener(raw, m, cfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return s
}

// greet dials with cfg and reads the greeting: nil if it arrived.
func (s *testServer) greet(cfg *tls.Config) error {
	d := &tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 5 * time.Second}}
	c, err := d.Dial("tcp", s.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "hello\n" {
		return io.ErrUnexpectedEOF
	}
	return nil
}

func testPKI(t *testing.T) *framework.PKI {
	t.Helper()
	pki, err := framework.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return pki
}

func clientTLS(t *testing.T, pki *framework.PKI, pair *framework.CertPair) *tls.Config {
	t.Helper()
	cfg, err := framework.ClientTLSConfig(pki.CA.CertFile, pair)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func serverOptions(pki *framework.PKI) Options {
	return Options{CertFile: pki.Member.CertFile, KeyFile: pki.Member.KeyFile, TrustedCAFile: pki.CA.CertFile, ClientCertAuth: true}
}

func mustMaterial(t *testing.T, o Options) *Material {
	t.Helper()
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestListenerRefusals(t *testing.T) {
	pki := testPKI(t)
	opts := serverOptions(pki)
	opts.CRLFile = pki.CRLFile
	s := startServer(t, mustMaterial(t, opts), ListenerConfig{})
	if err := s.greet(clientTLS(t, pki, pki.Client)); err != nil {
		t.Fatalf("good client: %v", err)
	}
	for _, tt := range []struct {
		name  string
		pair  *framework.CertPair
		error string // the client's
		log   string // the server's
	}{
		{"no certificate", nil, "certificate required", "client didn't provide a certificate"},
		{"other CA", pki.Foreign, "unknown certificate authority", "certificate signed by unknown authority"},
		{"revoked", pki.Revoked, "EOF", "transport: certificate serial"},
	} {
		err := s.greet(clientTLS(t, pki, tt.pair))
		if err == nil || !strings.Contains(err.Error(), tt.error) {
			t.Errorf("%s: client got %v, want %q", tt.name, err, tt.error)
		}
		if !s.log.waitFor(tt.log) {
			t.Errorf("%s: log has no %q:\n%s", tt.name, tt.log, s.log)
		}
	}
	if !s.log.waitFor(`"msg":"rejected connection on client endpoint"`) {
		t.Errorf("refusals not logged as etcd logs them:\n%s", s.log)
	}
}

func TestListenerAllowedNames(t *testing.T) {
	pki := testPKI(t)
	opts := serverOptions(pki)
	opts.AllowedCNs = []string{"member", "client"}
	s := startServer(t, mustMaterial(t, opts), ListenerConfig{Endpoint: "peer"})
	if err := s.greet(clientTLS(t, pki, pki.Client)); err != nil {
		t.Fatalf("allowed CN refused: %v", err)
	}
	if err := s.greet(clientTLS(t, pki, pki.Intruder)); err == nil || !strings.Contains(err.Error(), "bad certificate") {
		t.Fatalf("CN intruder: %v, want bad certificate", err)
	}
	if !s.log.waitFor("client certificate authentication failed") {
		t.Fatalf("log:\n%s", s.log)
	}

	opts = serverOptions(pki)
	opts.AllowedHostnames = []string{"localhost"}
	s = startServer(t, mustMaterial(t, opts), ListenerConfig{})
	if err := s.greet(clientTLS(t, pki, pki.Member)); err != nil {
		t.Fatalf("allowed hostname refused: %v", err)
	}
	if err := s.greet(clientTLS(t, pki, pki.Client)); err == nil {
		t.Fatal("certificate without the allowed hostname accepted")
	}
}

func TestListenerPeerSANCheck(t *testing.T) {
	pki := testPKI(t)
	other, err := pki.CA.Issue("elsewhere", framework.CertSpec{CommonName: "member", IPs: []net.IP{net.IPv4(192, 0, 2, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, mustMaterial(t, serverOptions(pki)), ListenerConfig{Endpoint: "peer", CheckSAN: true})
	if err := s.greet(clientTLS(t, pki, pki.Member)); err != nil {
		t.Fatalf("peer from an address in its SANs refused: %v", err)
	}
	if err := s.greet(clientTLS(t, pki, other)); err == nil {
		t.Fatal("peer from an address outside its SANs accepted")
	}
	if !s.log.waitFor("rejected connection on peer endpoint") {
		t.Fatalf("log:\n%s", s.log)
	}
	opts := serverOptions(pki)
	opts.SkipClientSANVerify = true
	s = startServer(t, mustMaterial(t, opts), ListenerConfig{Endpoint: "peer", CheckSAN: true})
	if err := s.greet(clientTLS(t, pki, other)); err != nil {
		t.Fatalf("with SkipClientSANVerify: %v", err)
	}
}

// A client that connects and says nothing is dropped after the
// handshake timeout instead of holding a goroutine forever.
func TestListenerHandshakeTimeout(t *testing.T) {
	pki := testPKI(t)
	s := startServer(t, mustMaterial(t, serverOptions(pki)), ListenerConfig{HandshakeTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("silent client: read %v, want EOF (closed by the server)", err)
	}
	if !s.log.waitFor("i/o timeout") {
		t.Fatalf("log:\n%s", s.log)
	}
}

func TestListenerReloadsCAAndLeaf(t *testing.T) {
	pki := testPKI(t)
	dir := t.TempDir()
	ca, crt, key := filepath.Join(dir, "ca"), filepath.Join(dir, "crt"), filepath.Join(dir, "key")
	for dst, src := range map[string]string{ca: pki.CA.CertFile, crt: pki.Member.CertFile, key: pki.Member.KeyFile} {
		if err := framework.ReplaceFile(dst, src); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, mustMaterial(t, Options{CertFile: crt, KeyFile: key, TrustedCAFile: ca}), ListenerConfig{})
	otherClient, err := pki.OtherCA.Issue("other-client", framework.CertSpec{CommonName: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.greet(clientTLS(t, pki, otherClient)); err == nil {
		t.Fatal("client of an untrusted CA accepted")
	}
	if err := framework.ReplaceFile(ca, pki.CA.CertFile, pki.OtherCA.CertFile); err != nil {
		t.Fatal(err)
	}
	if err := s.greet(clientTLS(t, pki, otherClient)); err != nil {
		t.Fatalf("client of the CA just added: %v", err)
	}

	next, err := pki.CA.Issue("next", framework.MemberSpec("member"))
	if err != nil {
		t.Fatal(err)
	}
	for dst, src := range map[string]string{key: next.KeyFile, crt: next.CertFile} {
		if err := framework.ReplaceFile(dst, src); err != nil {
			t.Fatal(err)
		}
	}
	cfg := clientTLS(t, pki, pki.Client)
	var served []byte
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		served = cs.PeerCertificates[0].Raw
		return nil
	}
	if err := s.greet(cfg); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served, next.Cert.Raw) {
		t.Fatal("the server still presents the old certificate")
	}
}

// ClientConfig trusts the CA bundle on disk when it is called.
func TestClientConfigReloadsRoots(t *testing.T) {
	pki := testPKI(t)
	foreignServer := startServer(t, mustMaterial(t, Options{CertFile: pki.Foreign.CertFile, KeyFile: pki.Foreign.KeyFile}), ListenerConfig{})
	ca := filepath.Join(t.TempDir(), "ca")
	if err := framework.ReplaceFile(ca, pki.CA.CertFile); err != nil {
		t.Fatal(err)
	}
	m := mustMaterial(t, Options{CertFile: pki.Member.CertFile, KeyFile: pki.Member.KeyFile, TrustedCAFile: ca})
	dial := func() error {
		cfg, err := m.ClientConfig("127.0.0.1")
		if err != nil {
			return err
		}
		return foreignServer.greet(cfg)
	}
	if err := dial(); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("server of an untrusted CA: %v", err)
	}
	if err := framework.ReplaceFile(ca, pki.CA.CertFile, pki.OtherCA.CertFile); err != nil {
		t.Fatal(err)
	}
	if err := dial(); err != nil {
		t.Fatalf("server of the CA just added: %v", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	pki := testPKI(t)
	for _, tt := range []struct {
		name string
		opts Options
		want string
	}{
		{"no key", Options{CertFile: pki.Member.CertFile}, "KeyFile and CertFile must both be present"},
		{"half client pair", Options{CertFile: pki.Member.CertFile, KeyFile: pki.Member.KeyFile, ClientCertFile: "x"}, "ClientKeyFile and ClientCertFile must both be present or both absent"},
		{"mismatched pair", Options{CertFile: pki.Member.CertFile, KeyFile: pki.Client.KeyFile}, "private key does not match public key"},
		{"CA file without certificates", Options{CertFile: pki.Member.CertFile, KeyFile: pki.Member.KeyFile, TrustedCAFile: pki.Member.KeyFile}, "no certificate found"},
		{"CNs and hostnames", Options{CertFile: pki.Member.CertFile, KeyFile: pki.Member.KeyFile, AllowedCNs: []string{"a"}, AllowedHostnames: []string{"b"}}, "mutually exclusive"},
	} {
		if _, err := New(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestSelfCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fixtures")
	opts, err := SelfCert(nil, dir, []string{"127.0.0.1:2379", "localhost:2379"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := mustMaterial(t, opts)
	s := startServer(t, m, ListenerConfig{})
	cfg, err := m.ClientConfig("")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.greet(cfg); err != nil {
		t.Fatalf("auto TLS: %v", err)
	}
	leaf, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	again, err := SelfCert(nil, dir, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	reused, err := tls.LoadX509KeyPair(again.CertFile, again.KeyFile)
	if err != nil || !bytes.Equal(reused.Certificate[0], leaf.Certificate[0]) {
		t.Fatalf("the existing pair was not reused: %v", err)
	}
	if _, err := SelfCert(nil, dir, nil, 0); err == nil {
		t.Fatal("validity 0 accepted")
	}
}
