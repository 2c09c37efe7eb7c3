package etcdcompat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestGRPCMetricsMatchLibrary drives grpcServerMetrics and the
// grpc-ecosystem ServerMetrics etcd uses with the same calls (unary and
// streaming, every kind of error, methods registered before and after
// the series are initialised, a code outside gRPC's list) and checks that
// both export the same families, series and counts, with and without the
// handling-time histogram (--metrics=extensive).
func TestGRPCMetricsMatchLibrary(t *testing.T) {
	for _, extensive := range []bool{false, true} {
		t.Run(fmt.Sprintf("extensive=%v", extensive), func(t *testing.T) {
			gs := grpc.NewServer()
			pb.RegisterKVServer(gs, &pb.UnimplementedKVServer{})
			pb.RegisterWatchServer(gs, &pb.UnimplementedWatchServer{})
			pb.RegisterMaintenanceServer(gs, &pb.UnimplementedMaintenanceServer{})
			healthpb.RegisterHealthServer(gs, health.NewServer())

			var libOpts []grpcprom.ServerMetricsOption
			if extensive {
				libOpts = append(libOpts, grpcprom.WithServerHandlingTimeHistogram())
			}
			lib := grpcprom.NewServerMetrics(libOpts...)
			lib.InitializeMetrics(gs)
			ours := newGRPCServerMetrics(extensive)
			ours.initialize(gs)

			libUnary, libStream := lib.UnaryServerInterceptor(), lib.StreamServerInterceptor()
			for _, ic := range []struct {
				unary  grpc.UnaryServerInterceptor
				stream grpc.StreamServerInterceptor
			}{{libUnary, libStream}, {ours.unary, ours.stream}} {
				driveCalls(t, ic.unary, ic.stream)
			}
			want, got := gatherOne(t, lib), gatherOne(t, ours)
			if got != want {
				t.Errorf("exported series differ from the library's\n--- library:\n%s\n--- ours:\n%s", want, got)
			}
		})
	}
}

// driveCalls makes the same calls through one pair of interceptors.
func driveCalls(t *testing.T, unary grpc.UnaryServerInterceptor, stream grpc.StreamServerInterceptor) {
	t.Helper()
	ctx := context.Background()
	unaryErrs := []error{
		nil,
		status.Error(codes.InvalidArgument, "etcdserver: bad"),
		fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "etcdserver: no leader")),
		context.Canceled,
		fmt.Errorf("wrapped: %w", context.DeadlineExceeded),
		errors.New("plain"),
		status.Error(codes.Code(20), "outside gRPC's codes"),
	}
	for _, method := range []string{"/etcdserverpb.KV/Range", "/etcdserverpb.KV/Put", "/v3lockpb.Lock/Lock", "/bad"} {
		for _, err := range unaryErrs {
			_, _ = unary(ctx, &pb.RangeRequest{}, &grpc.UnaryServerInfo{FullMethod: method},
				func(context.Context, any) (any, error) { return &pb.RangeResponse{}, err })
		}
	}
	streams := []struct {
		method         string
		client, server bool
		recv, send     int
		err            error
	}{
		{"/etcdserverpb.Watch/Watch", true, true, 3, 2, nil},
		{"/etcdserverpb.Watch/Watch", true, true, 1, 0, status.Error(codes.Canceled, "context canceled")},
		{"/etcdserverpb.Maintenance/Snapshot", false, true, 1, 4, errors.New("plain")},
		{"/v3electionpb.Election/Observe", false, true, 1, 2, nil},
		{"/etcdserverpb.Lease/LeaseKeepAlive", true, true, 2, 2, io.EOF},
	}
	for _, s := range streams {
		info := &grpc.StreamServerInfo{FullMethod: s.method, IsClientStream: s.client, IsServerStream: s.server}
		_ = stream(nil, &fakeStream{ctx: ctx}, info, func(_ any, ss grpc.ServerStream) error {
			for range s.recv {
				_ = ss.RecvMsg(&pb.WatchRequest{})
			}
			for range s.send {
				_ = ss.SendMsg(&pb.WatchResponse{})
			}
			return s.err
		})
	}
}

// gatherOne is every series c exports, one per line, sorted; histogram
// sums (durations) are left out, their counts and buckets' bounds kept.
func gatherOne(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			line := fmt.Sprintf("%s %s {%s} %q", f.GetName(), f.GetType(), strings.Join(labels, ","), f.GetHelp())
			switch {
			case m.GetCounter() != nil:
				line += fmt.Sprintf(" %g", m.GetCounter().GetValue())
			case m.GetHistogram() != nil:
				line += fmt.Sprintf(" count=%d buckets=%v", m.GetHistogram().GetSampleCount(), bucketBounds(m.GetHistogram()))
			}
			lines = append(lines, line)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func bucketBounds(h *dto.Histogram) []float64 {
	var b []float64
	for _, bk := range h.GetBucket() {
		b = append(b, bk.GetUpperBound())
	}
	return b
}

// fakeStream is a server stream whose messages come and go nowhere.
type fakeStream struct{ ctx context.Context }

func (s *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (s *fakeStream) SendHeader(metadata.MD) error { return nil }
func (s *fakeStream) SetTrailer(metadata.MD)       {}
func (s *fakeStream) Context() context.Context     { return s.ctx }
func (s *fakeStream) SendMsg(any) error            { return nil }
func (s *fakeStream) RecvMsg(any) error            { return nil }

// BenchmarkGRPCMetricsUnary is the interceptor's own cost per unary call,
// ours and the library's.
func BenchmarkGRPCMetricsUnary(b *testing.B) {
	gs := grpc.NewServer()
	pb.RegisterKVServer(gs, &pb.UnimplementedKVServer{})
	lib := grpcprom.NewServerMetrics()
	lib.InitializeMetrics(gs)
	ours := newGRPCServerMetrics(false)
	ours.initialize(gs)
	info := &grpc.UnaryServerInfo{FullMethod: "/etcdserverpb.KV/Range"}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx, req := context.Background(), &pb.RangeRequest{}
	for _, bc := range []struct {
		name string
		ic   grpc.UnaryServerInterceptor
	}{{"library", lib.UnaryServerInterceptor()}, {"ours", ours.unary}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = bc.ic(ctx, req, info, handler)
			}
		})
	}
}
