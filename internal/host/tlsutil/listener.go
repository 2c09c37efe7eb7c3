package tlsutil

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// ListenerConfig says how NewListener treats connections.
type ListenerConfig struct {
	// Endpoint names the listener in refusal logs: "client" or "peer"
	// ("rejected connection on client endpoint").
	Endpoint string
	// CheckSAN additionally requires a client certificate's SANs to name
	// the connection's remote address (etcd's peer listener), unless the
	// material's SkipClientSANVerify is set.
	CheckSAN bool
	// HandshakeTimeout bounds each handshake; 0 is HandshakeTimeout.
	HandshakeTimeout time.Duration
	Logger           *slog.Logger
}

// listener hands out connections whose handshake completed and passed
// the CRL (and SAN) checks. Handshakes run on their own goroutines so a
// slow or silent client never holds up Accept.
type listener struct {
	net.Listener // the TLS listener over the TCP one
	material     *Material
	cfg          ListenerConfig
	connc        chan net.Conn
	donec        chan struct{}
	err          error // set before donec is closed
}

// NewListener serves TLS on l with m's server configuration. Accept
// returns *tls.Conn values whose handshake is done.
func NewListener(l net.Listener, m *Material, cfg ListenerConfig) net.Listener {
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = HandshakeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tl := &listener{
		Listener: tls.NewListener(l, m.ServerConfig()),
		material: m,
		cfg:      cfg,
		connc:    make(chan net.Conn),
		donec:    make(chan struct{}),
	}
	go tl.acceptLoop()
	return tl
}

func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.connc:
		return c, nil
	case <-l.donec:
		return nil, l.err
	}
}

func (l *listener) Close() error {
	err := l.Listener.Close()
	<-l.donec
	return err
}

func (l *listener) acceptLoop() {
	var wg sync.WaitGroup
	var mu sync.Mutex // guards pending
	pending := map[net.Conn]struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		mu.Lock()
		for c := range pending {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		close(l.donec)
	}()
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			l.err = err
			return
		}
		mu.Lock()
		pending[conn] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			tc := conn.(*tls.Conn)
			err := l.handshake(ctx, tc)
			mu.Lock()
			delete(pending, conn)
			mu.Unlock()
			if err != nil {
				l.logRefusal(tc, err)
				tc.Close()
				return
			}
			select {
			case l.connc <- tc:
			case <-ctx.Done():
				tc.Close()
			}
		}()
	}
}

// handshake completes the TLS handshake within the timeout, then checks
// the CRL and, on a peer listener, the client certificate's SANs.
func (l *listener) handshake(ctx context.Context, tc *tls.Conn) error {
	_ = tc.SetDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	_ = tc.SetDeadline(time.Time{})
	certs := tc.ConnectionState().PeerCertificates
	if l.cfg.CheckSAN && !l.material.opts.SkipClientSANVerify && len(certs) > 0 {
		if err := checkCertSAN(ctx, certs[0], tc.RemoteAddr().String()); err != nil {
			return err
		}
	}
	return l.material.checkRevoked(certs)
}

// logRefusal logs a refused connection with etcd's message and fields;
// a client that merely hung up is logged at debug level.
func (l *listener) logRefusal(tc *tls.Conn, err error) {
	level := slog.LevelWarn
	if errors.Is(err, io.EOF) {
		level = slog.LevelDebug
	}
	state := tc.ConnectionState()
	attrs := []any{"remote-addr", tc.RemoteAddr().String(), "server-name", state.ServerName}
	if len(state.PeerCertificates) > 0 {
		id := IdentityOf(state.PeerCertificates[0])
		ips := make([]string, len(id.IPs))
		for i, ip := range id.IPs {
			ips[i] = ip.String()
		}
		attrs = append(attrs, "ip-addresses", ips, "dns-names", id.DNSNames)
	}
	attrs = append(attrs, "error", err.Error())
	l.cfg.Logger.Log(context.Background(), level, "rejected connection on "+l.cfg.Endpoint+" endpoint", attrs...)
}
