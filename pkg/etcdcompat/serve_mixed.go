package etcdcompat

import (
	"crypto/tls"
	"io"
	"net"

	"github.com/soheilhy/cmux"
)

// tlsRecordHandshake is the first byte of every TLS connection: the
// content type of the record carrying the ClientHello. No plaintext
// client protocol served here starts with it (gRPC and HTTP/2 open with
// "PRI", HTTP/1 with a method name).
const tlsRecordHandshake = 0x16

// ServeMixed accepts clients on one listener that both an http:// and an
// https:// client URL name (or unix:// and unixs://), until Stop, as
// etcd serves a host:port listed with both schemes. Each connection's
// first byte tells them apart: a TLS handshake goes through wrapTLS (the
// client TLS listener: its refusal rules, handshake timeout and CRL
// check) to ServeTLS, anything else to ServeKind; both serve what kind
// says. The member's TLS settings apply to the TLS connections only, as
// in etcd (--client-cert-auth does not refuse a plaintext client).
func (s *ClientServer) ServeMixed(l net.Listener, wrapTLS func(net.Listener) net.Listener, gatewayTLS *tls.Config, kind ListenerKind) error {
	m := cmux.New(l)
	secure := m.Match(isTLSHandshake)
	plain := m.Match(cmux.Any())
	errc := make(chan error, 3)
	go func() { errc <- s.ServeKind(plain, kind) }()
	go func() { errc <- s.ServeTLS(wrapTLS(secure), gatewayTLS, kind) }()
	go func() { errc <- m.Serve() }()
	// Whichever ends first (Stop closes both servers' listeners, and so
	// l; a server started after Stop returns at once), closing l ends
	// the mux and with it the other server: cmux's Close leaves l open.
	closeAll := func() {
		m.Close()
		l.Close()
	}
	if err := waitServing(errc, 3, closeAll); !isServingEnd(err) {
		return err
	}
	return nil
}

// isTLSHandshake is the cmux matcher of connections that open a TLS
// handshake.
func isTLSHandshake(r io.Reader) bool {
	var b [1]byte
	n, _ := io.ReadFull(r, b[:])
	return n == 1 && b[0] == tlsRecordHandshake
}
