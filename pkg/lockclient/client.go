package lockclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metastore-io/metastore/pkg/lockapi"
)

// Defaults of Config.
const (
	DefaultMaxRetries    = 3
	DefaultRetryInterval = 200 * time.Millisecond
	DefaultTimeout       = 5 * time.Second
	// DefaultKeepAliveTimeout is Config.KeepAliveTimeout's default: three
	// of the service's one-second keep-alives missed.
	DefaultKeepAliveTimeout = 3 * time.Second
)

// Request names the resource to lock and the node asking.
type Request struct {
	Type       string
	ResourceID string
	NodeID     string
	// NoWait fails with a *StatusError of 409 instead of queueing, and
	// also when NodeID already has a place (queued or holding) on another
	// request, which it leaves as it is.
	NoWait bool
	// OnQueued, if set, is called with the number of contenders ahead
	// when the request is queued.
	OnQueued func(position int)
}

// Callbacks are the optional hooks Do runs around the critical section.
type Callbacks struct {
	// ShouldSkipOperation is asked before the lock is requested; true
	// skips the operation without locking.
	ShouldSkipOperation func(ctx context.Context, req Request) (skip bool, err error)
	// UpdateRefCount runs after the operation succeeded, while the lock is
	// still held; its error counts as the operation's.
	UpdateRefCount func(ctx context.Context, req Request) error
}

// Config configures a Client.
type Config struct {
	// Endpoints are the members' client URLs, e.g. http://127.0.0.1:2379.
	Endpoints []string
	// HTTPClient sends the requests; http.DefaultClient's transport when
	// nil. It must not have a Timeout: a held lock is an open response.
	HTTPClient *http.Client
	// MaxRetries is how many times a network error is retried (0:
	// DefaultMaxRetries; negative: never).
	MaxRetries int
	// RetryInterval separates the attempts (0: DefaultRetryInterval).
	RetryInterval time.Duration
	// Timeout bounds each request until its first answer: the whole of
	// /unlock, and /lock until it is acquired or queued (0: DefaultTimeout).
	Timeout time.Duration
	// KeepAliveTimeout applies to a service that reports no validity (one
	// older than lockapi.LockRequest.ReportValidity): a held lock is taken
	// as lost, Lost fires and Err is ErrKeepAliveTimeout, when no line
	// of its stream arrived for that long (0: DefaultKeepAliveTimeout;
	// negative: never). A service that reports validity sets the
	// deadline itself: the receipt of its last line plus the validity it
	// carried.
	KeepAliveTimeout time.Duration
	// Authorization, if set, is sent as the Authorization header of every
	// request: an auth token (etcd's Authenticate), when the cluster has
	// authentication enabled.
	Authorization string
	Callbacks
}

// Client talks to the lock service. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	next atomic.Uint32 // index of the endpoint to try first
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("lockclient: no endpoints")
	}
	for i, ep := range cfg.Endpoints {
		if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
			return nil, fmt.Errorf("lockclient: endpoint %q needs http:// or https://", ep)
		}
		cfg.Endpoints[i] = strings.TrimSuffix(ep, "/")
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.KeepAliveTimeout == 0 {
		cfg.KeepAliveTimeout = DefaultKeepAliveTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{cfg: cfg, http: hc}, nil
}

// StatusError is an HTTP error answer of the service.
type StatusError struct {
	Code     int
	Message  string
	Position int // contenders ahead, for a 409 to a NoWait request
	// Token, for a 409 to a NoWait request, is the token of the place the
	// node already has on another request (0 when it has none); that
	// place is left as it is.
	Token int64
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("lock service: %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// NetworkError is a failure to reach the service or read its answer: the
// kind of error the client retries.
type NetworkError struct{ Err error }

func (e *NetworkError) Error() string { return "lock service unreachable: " + e.Err.Error() }
func (e *NetworkError) Unwrap() error { return e.Err }

// retry runs attempt until it succeeds, fails with anything but a
// *NetworkError, or MaxRetries retries are used up.
func (c *Client) retry(ctx context.Context, attempt func(endpoint string) error) error {
	var err error
	for i := 0; ; i++ {
		ep := c.cfg.Endpoints[int(c.next.Load())%len(c.cfg.Endpoints)]
		err = attempt(ep)
		var netErr *NetworkError
		if err == nil || !errors.As(err, &netErr) || ctx.Err() != nil || i >= c.cfg.MaxRetries {
			return err
		}
		c.next.Add(1)
		pause := time.NewTimer(c.cfg.RetryInterval)
		select {
		case <-ctx.Done():
			pause.Stop()
			return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-pause.C:
		}
	}
}

// post sends body to endpoint+path; the caller closes the response.
func (c *Client) post(ctx context.Context, endpoint, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.cfg.Authorization != "" {
		req.Header.Set("Authorization", c.cfg.Authorization)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &NetworkError{Err: err}
	}
	return resp, nil
}

// statusError reads an error answer.
func statusError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var ev lockapi.Event
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &ev) == nil && ev.Error != "" {
		msg = ev.Error
	}
	return &StatusError{Code: resp.StatusCode, Message: msg, Position: ev.Position, Token: ev.Token}
}

// Lock waits until req.NodeID holds the lock on req.Type:req.ResourceID
// or ctx ends. The lock is held until Unlock or Close, or until Lost.
func (c *Client) Lock(ctx context.Context, req Request) (*Lock, error) {
	if err := (lockapi.LockRequest{Type: req.Type, ResourceID: req.ResourceID, NodeID: req.NodeID}).Validate(); err != nil {
		return nil, fmt.Errorf("lockclient: %w", err)
	}
	var l *Lock
	err := c.retry(ctx, func(endpoint string) error {
		var err error
		l, err = c.lockOnce(ctx, endpoint, req)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lock %s:%s: %w", req.Type, req.ResourceID, err)
	}
	return l, nil
}

// lockOnce is one /lock request: the first answer must come within
// Timeout; a queued request then waits for as long as ctx allows, as long
// as the member keeps writing. Its keep-alive lines come every second, so
// KeepAliveTimeout (when positive) without any line means the member
// stopped serving the request (frozen, cut off, dead without a FIN): the
// attempt ends as a *NetworkError, which Lock retries on the next
// endpoint, where the same NodeID takes its place in the queue back.
//
// ctx bounds the wait only: once acquired, the lock is held until Unlock,
// Close or its loss, whatever becomes of ctx (as an etcd mutex outlives
// its Lock call's context).
func (c *Client) lockOnce(ctx context.Context, endpoint string, req Request) (*Lock, error) {
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopFollowingCtx := context.AfterFunc(ctx, cancel)
	var timedOut atomic.Bool
	bound := c.cfg.Timeout
	timer := time.AfterFunc(bound, func() {
		timedOut.Store(true)
		cancel()
	})
	fail := func(err error) (*Lock, error) {
		timer.Stop()
		stopFollowingCtx()
		cancel()
		if timedOut.Load() {
			return nil, &NetworkError{Err: fmt.Errorf("no word from the member within %v", bound)}
		}
		return nil, err
	}
	resp, err := c.post(streamCtx, endpoint, lockapi.PathLock,
		lockapi.LockRequest{Type: req.Type, ResourceID: req.ResourceID, NodeID: req.NodeID, NoWait: req.NoWait, ReportValidity: true})
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return fail(statusError(resp))
	}
	events := newEventReader(resp.Body)
	armed := true // timer runs
	for {
		ev, blank, err := events.line()
		if err != nil {
			resp.Body.Close()
			if ctx.Err() != nil && !timedOut.Load() {
				return fail(ctx.Err())
			}
			return fail(&NetworkError{Err: fmt.Errorf("read the answer: %w", err)})
		}
		// A line, a keep-alive included, is the member's word that it
		// still serves the request.
		if armed && !timer.Stop() {
			return fail(nil) // the bound passed just as the line came
		}
		armed = c.cfg.KeepAliveTimeout > 0
		if armed {
			bound = c.cfg.KeepAliveTimeout
			timer.Reset(bound)
		}
		if blank {
			continue
		}
		switch ev.Status {
		case lockapi.StatusQueued:
			if req.OnQueued != nil {
				req.OnQueued(ev.Position)
			}
		case lockapi.StatusAcquired:
			timer.Stop()
			if !stopFollowingCtx() {
				resp.Body.Close()
				return fail(ctx.Err()) // ctx ended as the lock came
			}
			return newLock(c, endpoint, req, ev, time.Now(), resp.Body, events, cancel), nil
		default:
			resp.Body.Close()
			timer.Stop()
			stopFollowingCtx()
			cancel()
			return nil, &StatusError{Code: http.StatusConflict, Message: fmt.Sprintf("%s: %s", ev.Status, ev.Error)}
		}
	}
}

// eventReader reads the JSON lines of a /lock stream.
type eventReader struct{ sc *bufio.Scanner }

func newEventReader(r io.Reader) *eventReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 64<<10)
	return &eventReader{sc: sc}
}

// next returns the next event, skipping blank keep-alive lines.
func (e *eventReader) next() (lockapi.Event, error) {
	for {
		ev, blank, err := e.line()
		if err != nil || !blank {
			return ev, err
		}
	}
}

// line reads one line: an event, or a blank keep-alive (blank true).
func (e *eventReader) line() (ev lockapi.Event, blank bool, err error) {
	if !e.sc.Scan() {
		if err := e.sc.Err(); err != nil {
			return ev, false, err
		}
		return ev, false, io.ErrUnexpectedEOF
	}
	line := bytes.TrimSpace(e.sc.Bytes())
	if len(line) == 0 {
		return ev, true, nil
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return ev, false, fmt.Errorf("bad event %q: %w", line, err)
	}
	return ev, false, nil
}

// Lock is a held lock: an open /lock response.
type Lock struct {
	c        *Client
	endpoint string
	req      Request
	token    int64
	body     io.Closer
	cancel   context.CancelFunc
	// deadline is the client-side deadline (nil without one: no
	// validity reported and KeepAliveTimeout negative).
	deadline *deadline

	lost    chan struct{}
	endOnce sync.Once
	endMu   sync.Mutex
	endEv   lockapi.Event // the stream's last event, once lost is closed
	endErr  error
	closing atomic.Bool
}

func newLock(c *Client, endpoint string, req Request, acquired lockapi.Event, at time.Time, body io.Closer, events *eventReader, cancel context.CancelFunc) *Lock {
	l := &Lock{c: c, endpoint: endpoint, req: req, token: acquired.Token, body: body, cancel: cancel, lost: make(chan struct{})}
	switch {
	case acquired.ValidMS > 0:
		l.deadline = newDeadline(at.Add(time.Duration(acquired.ValidMS)*time.Millisecond), l.timedOut)
	case c.cfg.KeepAliveTimeout > 0:
		l.deadline = newDeadline(at.Add(c.cfg.KeepAliveTimeout), l.timedOut)
	}
	if l.deadline != nil {
		l.deadline.start()
	}
	go l.follow(events, acquired.ValidMS > 0)
	return l
}

// follow reads the stream until it ends and records how, moving the
// client-side deadline with each line: to its receipt plus the validity a
// "held" event carries, or, from a service that reports none (reports
// false), plus KeepAliveTimeout for any line.
func (l *Lock) follow(events *eventReader, reports bool) {
	for {
		ev, blank, err := events.line()
		now := time.Now()
		switch {
		case err != nil:
			l.finish(lockapi.Event{}, err)
			return
		case blank:
			if !reports && l.deadline != nil {
				l.deadline.move(now.Add(l.c.cfg.KeepAliveTimeout))
			}
		case ev.Status == lockapi.StatusHeld:
			if !reports && l.deadline == nil {
				continue // no deadline was asked for
			}
			reports = true
			l.deadline.move(now.Add(time.Duration(ev.ValidMS) * time.Millisecond))
		default:
			l.finish(ev, nil)
			return
		}
	}
}

// timedOut ends the lock at its client-side deadline and drops the
// stream: past the deadline the service may have granted the lock to
// someone else.
func (l *Lock) timedOut() {
	l.finish(lockapi.Event{}, ErrKeepAliveTimeout)
	l.cancel()
	l.body.Close()
}

// finish records how the lock ended, once, and closes lost.
func (l *Lock) finish(ev lockapi.Event, err error) {
	l.endOnce.Do(func() {
		if l.deadline != nil {
			l.deadline.stop()
		}
		l.endMu.Lock()
		l.endEv, l.endErr = ev, err
		l.endMu.Unlock()
		close(l.lost)
	})
}

// Token is the fencing token: strictly increasing across holders.
func (l *Lock) Token() int64 { return l.token }

// Lost is closed when the lock's stream ends: after Unlock or Close, or
// when the lock is lost (connection broken, lease expired, superseded),
// or at the client-side deadline (ErrKeepAliveTimeout): the receipt of
// the stream's last line plus the validity it reported, past which the
// service may have granted the lock to someone else.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Err says why the stream ended; nil while it is open.
func (l *Lock) Err() error {
	select {
	case <-l.lost:
	default:
		return nil
	}
	l.endMu.Lock()
	defer l.endMu.Unlock()
	if errors.Is(l.endErr, ErrKeepAliveTimeout) {
		return fmt.Errorf("lock %s:%s lost: %w", l.req.Type, l.req.ResourceID, l.endErr)
	}
	if l.endErr != nil {
		return fmt.Errorf("lock stream broken: %w", l.endErr)
	}
	return fmt.Errorf("lock %s: %s", l.endEv.Status, l.endEv.Error)
}

// Unlock tells the service the operation's outcome (success, and opErr
// when it failed) and releases the lock. It answers whether the service
// released it; a 403 (not the holder any more) is released=false with a
// *StatusError. The stream is closed in every case.
func (l *Lock) Unlock(ctx context.Context, success bool, opErr error) (bool, error) {
	defer l.Close()
	body := lockapi.UnlockRequest{Type: l.req.Type, ResourceID: l.req.ResourceID, NodeID: l.req.NodeID,
		Success: &success, Token: l.token}
	if opErr != nil {
		body.Err = opErr.Error()
	}
	var out lockapi.UnlockResponse
	retried := false
	err := l.c.retry(ctx, func(endpoint string) error {
		reqCtx, cancel := context.WithTimeout(ctx, l.c.cfg.Timeout)
		defer cancel()
		resp, err := l.c.post(reqCtx, endpoint, lockapi.PathUnlock, body)
		if err != nil {
			retried = true
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return statusError(resp)
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			retried = true
			return &NetworkError{Err: fmt.Errorf("read the answer: %w", err)}
		}
		return nil
	})
	var se *StatusError
	if retried && errors.As(err, &se) && se.Code == http.StatusForbidden && l.releasedByStream() {
		// An earlier attempt released it; its answer was lost.
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("unlock %s:%s: %w", l.req.Type, l.req.ResourceID, err)
	}
	return out.Released, nil
}

// releasedByStream waits briefly for the stream to say it was released.
func (l *Lock) releasedByStream() bool {
	select {
	case <-l.lost:
	case <-time.After(l.c.cfg.Timeout):
		return false
	}
	l.endMu.Lock()
	defer l.endMu.Unlock()
	return l.endErr == nil && l.endEv.Status == lockapi.StatusReleased
}

// Close drops the lock without reporting an outcome: the service releases
// it as a disconnect.
func (l *Lock) Close() {
	if l.closing.Swap(true) {
		return
	}
	l.cancel()
	l.body.Close()
	<-l.lost
}

// Do runs op under the lock, with the callbacks around it: it asks
// ShouldSkipOperation (skipped=true without locking if so), locks, runs op
// with a context that ends if the lock is lost, runs UpdateRefCount after
// a successful op, and unlocks with the outcome.
func (c *Client) Do(ctx context.Context, req Request, op func(ctx context.Context, l *Lock) error) (skipped bool, err error) {
	if c.cfg.ShouldSkipOperation != nil {
		skip, err := c.cfg.ShouldSkipOperation(ctx, req)
		if err != nil {
			return false, fmt.Errorf("ShouldSkipOperation: %w", err)
		}
		if skip {
			return true, nil
		}
	}
	l, err := c.Lock(ctx, req)
	if err != nil {
		return false, err
	}
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.Lost():
			cancel()
		case <-opCtx.Done():
		}
	}()
	opErr := op(opCtx, l)
	if opErr == nil && c.cfg.UpdateRefCount != nil {
		if err := c.cfg.UpdateRefCount(opCtx, req); err != nil {
			opErr = fmt.Errorf("UpdateRefCount: %w", err)
		}
	}
	if lost := l.Err(); lost != nil {
		// The lock ended under op (its context was cancelled then): say why.
		opErr = errors.Join(opErr, lost)
	}
	released, unlockErr := l.Unlock(context.WithoutCancel(ctx), opErr == nil, opErr)
	if unlockErr == nil && !released {
		unlockErr = errors.New("the service did not release the lock")
	}
	return false, errors.Join(opErr, unlockErr)
}
