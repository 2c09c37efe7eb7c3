package transport

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/metastore-io/metastore/test/raftkit"
)

func mustRegister(t *testing.T, tr *Transport, method string, h ForwardHandler) {
	t.Helper()
	if err := tr.RegisterForwardHandler(method, h); err != nil {
		t.Fatal(err)
	}
}

func TestForwardRoundTripAndErrors(t *testing.T) {
	small := func(c *Config) { c.MaxForwardSize = 1 << 10 }
	a := startMember(t, 1, 0xc1, small)
	b := startMember(t, 2, 0xc1, small)
	connect(t, a, b)
	ctx := raftkit.Context(t)

	mustRegister(t, b.tr, "echo", func(_ context.Context, req []byte) ([]byte, error) {
		return append([]byte("echo:"), req...), nil
	})
	mustRegister(t, b.tr, "lease.renew", func(context.Context, []byte) ([]byte, error) {
		return nil, rpctypes.ErrGRPCLeaseNotFound
	})
	mustRegister(t, b.tr, "plain", func(context.Context, []byte) ([]byte, error) {
		return nil, errors.New("disk on fire")
	})
	mustRegister(t, b.tr, "big", func(context.Context, []byte) ([]byte, error) {
		return make([]byte, 2<<10), nil
	})

	resp, err := a.tr.Forward(ctx, 2, "echo", []byte("hi"))
	if err != nil || string(resp) != "echo:hi" {
		t.Fatalf("echo: %q, %v", resp, err)
	}
	empty, err := a.tr.Forward(ctx, 2, "echo", nil)
	if err != nil || string(empty) != "echo:" {
		t.Fatalf("echo of nothing: %q, %v", empty, err)
	}
	// A gRPC status keeps its identity across the hop.
	if _, err := a.tr.Forward(ctx, 2, "lease.renew", nil); !errors.Is(err, rpctypes.ErrGRPCLeaseNotFound) {
		t.Fatalf("lease error: %v", err)
	}
	if _, err := a.tr.Forward(ctx, 2, "plain", nil); status.Code(err) != codes.Unknown || !bytes.Contains([]byte(err.Error()), []byte("disk on fire")) {
		t.Fatalf("plain error: %v", err)
	}
	if _, err := a.tr.Forward(ctx, 2, "missing", nil); status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}
	if _, err := a.tr.Forward(ctx, 2, "echo", make([]byte, 2<<10)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized request: %v", err)
	}
	if _, err := a.tr.Forward(ctx, 2, "big", nil); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized answer: %v", err)
	}
	if _, err := a.tr.Forward(ctx, 7, "echo", nil); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("unknown peer: %v", err)
	}
	for _, bad := range []string{"", "a/b", "x y", "é"} {
		if err := b.tr.RegisterForwardHandler(bad, nil); err == nil {
			t.Fatalf("method name %q accepted", bad)
		}
	}
}

func TestForwardRespectsDeadlineAndCancel(t *testing.T) {
	a := startMember(t, 1, 0xc1, nil)
	b := startMember(t, 2, 0xc1, nil)
	connect(t, a, b)

	type seen struct {
		hadDeadline bool
		err         error
	}
	entered := make(chan struct{}, 1)
	ended := make(chan seen, 1)
	mustRegister(t, b.tr, "wait", func(ctx context.Context, _ []byte) ([]byte, error) {
		entered <- struct{}{}
		_, ok := ctx.Deadline()
		<-ctx.Done()
		ended <- seen{hadDeadline: ok, err: ctx.Err()}
		return nil, ctx.Err()
	})

	// The caller's deadline travels with the request.
	ctx, cancel := context.WithTimeout(raftkit.Context(t), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := a.tr.Forward(ctx, 2, "wait", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("forward past its deadline: %v", err)
	}
	if took := time.Since(start); took > raftkit.Timeout/2 {
		t.Fatalf("forward returned %v after a 300ms deadline", took)
	}
	receive(t, "handler call", entered)
	if s := receive(t, "handler context to end", ended); !s.hadDeadline || s.err == nil {
		t.Fatalf("handler context: deadline %v, ended with %v", s.hadDeadline, s.err)
	}

	// Cancelling the caller (no deadline) cancels the handler too.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	errc := make(chan error, 1)
	go func() {
		_, err := a.tr.Forward(ctx2, 2, "wait", nil)
		errc <- err
	}()
	receive(t, "handler call", entered)
	cancel2()
	if err := receive(t, "cancelled forward to return", errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled forward: %v", err)
	}
	if s := receive(t, "handler context to end with its caller", ended); s.hadDeadline || !errors.Is(s.err, context.Canceled) {
		t.Fatalf("handler context after cancel: deadline %v, err %v", s.hadDeadline, s.err)
	}
}
