package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ForwardHandler answers a forwarded request: protobuf bytes in, protobuf
// bytes out. ctx ends when the caller gives up or its deadline passes. An
// error carrying a gRPC status (status.Error, etcd's rpctypes errors)
// reaches the caller with the same code and message, so errors.Is against
// such sentinels works there; other errors arrive as codes.Unknown.
type ForwardHandler func(ctx context.Context, req []byte) ([]byte, error)

// RegisterForwardHandler makes method answerable by Forward from peers.
// Method names are [A-Za-z0-9._-]+; registering a name again replaces its
// handler.
func (t *Transport) RegisterForwardHandler(method string, h ForwardHandler) error {
	if err := checkMethod(method); err != nil {
		return err
	}
	t.forwardMu.Lock()
	t.forwardHandlers[method] = h
	t.forwardMu.Unlock()
	return nil
}

// Forward sends req to method on member to and returns its answer. It
// respects ctx (its deadline travels with the request). Errors wrap
// ErrUnknownPeer, ErrUnreachable (no answer: the caller may retry), the
// context's error, or the handler's gRPC status.
func (t *Transport) Forward(ctx context.Context, to uint64, method string, req []byte) ([]byte, error) {
	resp, err := t.forward(ctx, to, method, req)
	if err != nil {
		return nil, fmt.Errorf("transport: forward %s to %s: %w", method, idString(to), err)
	}
	return resp, nil
}

func (t *Transport) forward(ctx context.Context, to uint64, method string, req []byte) ([]byte, error) {
	if err := checkMethod(method); err != nil {
		return nil, err
	}
	if len(req) > t.cfg.MaxForwardSize {
		return nil, status.Errorf(codes.ResourceExhausted, "request of %d bytes is over the %d-byte forward limit", len(req), t.cfg.MaxForwardSize)
	}
	p := t.peer(to)
	if p == nil {
		return nil, ErrUnknownPeer
	}
	url := p.currentURL()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url+pathForward+method, bytes.NewReader(req))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	t.setIdentity(hreq.Header, to)
	hreq.Header.Set("Content-Type", "application/octet-stream")
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		hreq.Header.Set(hdrTimeout, strconv.FormatInt(max(left.Microseconds(), 1), 10))
	}
	resp, err := t.calls.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.cfg.MaxForwardSize)+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: read answer: %w", ErrUnreachable, err)
	}
	if resp.StatusCode == http.StatusOK {
		if len(body) > t.cfg.MaxForwardSize {
			return nil, status.Errorf(codes.ResourceExhausted, "answer over the %d-byte forward limit", t.cfg.MaxForwardSize)
		}
		return body, nil
	}
	if code := resp.Header.Get(hdrErrorCode); code != "" {
		c, err := strconv.ParseUint(code, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("peer sent a malformed error code %q: %s", code, body)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		st := status.Error(codes.Code(c), string(body))
		// The handler's copy of the deadline can fire a hair before the
		// caller's: keep the answer matching the caller's context error.
		switch codes.Code(c) {
		case codes.DeadlineExceeded:
			return nil, fmt.Errorf("%w (%w)", context.DeadlineExceeded, st)
		case codes.Canceled:
			return nil, fmt.Errorf("%w (%w)", context.Canceled, st)
		}
		return nil, st
	}
	// Refused before reaching a handler (identity, member starting).
	return nil, fmt.Errorf("%w: %w", ErrUnreachable, t.refusal(to, url, &http.Response{
		StatusCode: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)),
	}))
}

// serveForward runs a registered handler for a peer.
func (t *Transport) serveForward(w http.ResponseWriter, r *http.Request, from uint64, _ *attachment) {
	method := r.PathValue("method")
	t.forwardMu.RLock()
	h := t.forwardHandlers[method]
	t.forwardMu.RUnlock()
	if h == nil {
		writeForwardError(w, status.Errorf(codes.Unimplemented, "no forward handler for method %q", method))
		return
	}
	limit := int64(t.cfg.MaxForwardSize)
	if r.ContentLength > limit {
		writeForwardError(w, status.Errorf(codes.ResourceExhausted, "request of %d bytes is over the %d-byte forward limit", r.ContentLength, limit))
		return
	}
	req, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		writeForwardError(w, status.Errorf(codes.Unavailable, "read request: %v", err))
		return
	}
	if int64(len(req)) > limit {
		writeForwardError(w, status.Errorf(codes.ResourceExhausted, "request over the %d-byte forward limit", limit))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()
	if v := r.Header.Get(hdrTimeout); v != "" {
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil || us <= 0 {
			writeForwardError(w, status.Errorf(codes.InvalidArgument, "bad %s header %q", hdrTimeout, v))
			return
		}
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, time.Duration(us)*time.Microsecond)
		defer cancelTimeout()
	}
	resp, err := h(ctx, req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			err = status.FromContextError(ctxErr).Err()
		}
		writeForwardError(w, err)
		return
	}
	if int64(len(resp)) > limit {
		t.log.Error("forward handler answer over the limit", "method", method, "peer", idString(from), "bytes", len(resp), "limit", limit)
		writeForwardError(w, status.Errorf(codes.ResourceExhausted, "answer of %d bytes is over the %d-byte forward limit", len(resp), limit))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(resp)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp) // a failed write means the caller is gone
}

func writeForwardError(w http.ResponseWriter, err error) {
	st, _ := status.FromError(err)
	w.Header().Set(hdrErrorCode, strconv.FormatUint(uint64(st.Code()), 10))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = io.WriteString(w, st.Message())
}

func checkMethod(method string) error {
	if method == "" {
		return errors.New("transport: empty forward method name")
	}
	for i := 0; i < len(method); i++ {
		c := method[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("transport: forward method %q: only [A-Za-z0-9._-] allowed", method)
		}
	}
	return nil
}
