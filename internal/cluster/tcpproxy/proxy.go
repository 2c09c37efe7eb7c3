package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
)

// DefaultRetryDelay is how long an endpoint stays inactive when
// Config.RetryDelay is 0 (etcd's TCP proxy default; the gateway command
// passes its --retry-delay, one minute by default).
const DefaultRetryDelay = 5 * time.Minute

// Config configures a Proxy.
type Config struct {
	// Listener is where clients connect; the Proxy closes it on Close.
	Listener net.Listener
	// Endpoints are the members' client addresses as SRV records: Target
	// and Port name the address, Priority and Weight choose among them.
	Endpoints []*net.SRV
	// RetryDelay is how long an endpoint that refused a dial is left out
	// of the rotation before it is dialed again.
	RetryDelay time.Duration
	Logger     *slog.Logger
	// Dial opens a connection to an endpoint; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Proxy splices client connections to the endpoints (see the package
// documentation).
type Proxy struct {
	cfg    Config
	ctx    context.Context // cancelled by Close: ends dials and retries
	cancel context.CancelFunc
	wg     sync.WaitGroup // connection and retry goroutines

	mu      sync.Mutex // guards the fields below and every remote's inactive
	remotes []*remote
	next    int // round-robin position in remotes
	conns   map[net.Conn]struct{}
	closed  bool
}

// remote is one endpoint.
type remote struct {
	srv      *net.SRV
	addr     string
	inactive bool // since a dial failed, until a retry succeeds
}

// New builds a proxy over cfg.Endpoints; Serve starts it.
func New(cfg Config) (*Proxy, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("tcpproxy: no endpoints")
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{}).DialContext
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{cfg: cfg, ctx: ctx, cancel: cancel, conns: make(map[net.Conn]struct{})}
	for _, s := range cfg.Endpoints {
		p.remotes = append(p.remotes, &remote{srv: s, addr: net.JoinHostPort(s.Target, strconv.Itoa(int(s.Port)))})
	}
	return p, nil
}

// Endpoints are the addresses the proxy forwards to, in rotation order.
func (p *Proxy) Endpoints() []string {
	out := make([]string, len(p.remotes))
	for i, r := range p.remotes {
		out[i] = r.addr
	}
	return out
}

// Serve accepts clients until the listener fails or Close closes it
// (then it returns nil). It logs "ready to proxy client requests" first,
// the line etcd's gateway prints and tools wait for.
func (p *Proxy) Serve() error {
	p.cfg.Logger.Info("ready to proxy client requests", "endpoints", p.Endpoints())
	for {
		in, err := p.cfg.Listener.Accept()
		if err != nil {
			if p.isClosed() {
				return nil
			}
			return fmt.Errorf("tcpproxy: accept: %w", err)
		}
		if !p.accepted(in) {
			in.Close()
			return nil
		}
		go func() {
			defer p.wg.Done()
			p.serve(in)
		}()
	}
}

// Close stops accepting, closes every proxied connection and waits for
// the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.cancel()
	err := p.cfg.Listener.Close()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// accepted tracks a client connection and counts its goroutine in wg;
// false once closed.
func (p *Proxy) accepted(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	return true
}

// track records c so that Close closes it; false once closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		if p.conns != nil {
			delete(p.conns, c)
		}
		c.Close()
	}
}

// serve connects in to an endpoint, trying the next one after each
// failed dial, and copies both ways until both directions end.
func (p *Proxy) serve(in net.Conn) {
	out := p.connect()
	if out == nil || !p.track(out) {
		if out != nil {
			out.Close()
		}
		p.untrack(in)
		return
	}
	defer p.untrack(in, out)
	done := make(chan struct{})
	go func() {
		defer close(done)
		splice(in, out)
	}()
	splice(out, in)
	<-done
}

// splice copies src to dst; at src's end of stream it passes the
// half-close on to dst, as the client's direct connection would, and on
// a failure it closes both so that the other direction ends too.
func splice(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
}

// connect dials active endpoints in pick order until one answers; nil
// when none is active (or the proxy is closing).
func (p *Proxy) connect() net.Conn {
	for {
		r := p.pick()
		if r == nil {
			return nil
		}
		out, err := p.cfg.Dial(p.ctx, "tcp", r.addr)
		if err == nil {
			return out
		}
		if p.ctx.Err() != nil {
			return nil
		}
		p.deactivate(r, err)
	}
}

// pick chooses an active endpoint of the best priority class: weighted
// at random when the class has weights, otherwise the next in rotation.
func (p *Proxy) pick() *remote {
	p.mu.Lock()
	defer p.mu.Unlock()
	found, best, weights, unweighted := false, uint16(0), 0, 0
	for _, r := range p.remotes {
		if r.inactive || (found && r.srv.Priority > best) {
			continue
		}
		if !found || r.srv.Priority < best {
			found, best, weights, unweighted = true, r.srv.Priority, 0, 0
		}
		if r.srv.Weight > 0 {
			weights += int(r.srv.Weight)
		} else {
			unweighted++
		}
	}
	if !found {
		return nil
	}
	// RFC 2782: among weighted records, those of weight 0 have a very
	// small chance of being chosen (one in a hundred, as etcd's proxy).
	if weights > 0 && (unweighted == 0 || rand.IntN(100) != 0) {
		n := rand.IntN(weights)
		for _, r := range p.remotes {
			if r.inactive || r.srv.Priority != best {
				continue
			}
			if n -= int(r.srv.Weight); n < 0 {
				return r
			}
		}
	}
	for i := range p.remotes {
		r := p.remotes[(p.next+i)%len(p.remotes)]
		if !r.inactive && r.srv.Priority == best && r.srv.Weight == 0 {
			p.next = (p.next + i + 1) % len(p.remotes)
			return r
		}
	}
	return nil // not reached: the class has an unweighted record
}

// deactivate takes r out of the rotation after a failed dial and starts
// its retries, unless another connection did already.
func (p *Proxy) deactivate(r *remote, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.inactive || p.closed {
		return
	}
	r.inactive = true
	p.cfg.Logger.Warn("deactivated endpoint", "address", r.addr, "interval", p.cfg.RetryDelay, "error", err)
	p.wg.Go(func() { p.retry(r) })
}

// retry dials r every RetryDelay until it answers, then puts it back in
// the rotation.
func (p *Proxy) retry(r *remote) {
	t := time.NewTimer(p.cfg.RetryDelay)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		c, err := p.cfg.Dial(p.ctx, "tcp", r.addr)
		if err == nil {
			c.Close()
			p.mu.Lock()
			r.inactive = false
			p.mu.Unlock()
			p.cfg.Logger.Info("activated", "address", r.addr)
			return
		}
		if p.ctx.Err() != nil {
			return
		}
		p.cfg.Logger.Warn("failed to activate endpoint (stay inactive for another interval)", "address", r.addr, "interval", p.cfg.RetryDelay, "error", err)
		t.Reset(p.cfg.RetryDelay)
	}
}
