package etcdcompat

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// grpcServerMetrics is the grpc_server_* family etcd 3.6 exports through
// the grpc-ecosystem interceptors (go-grpc-middleware/providers/prometheus
// with its default options; grpc_server_handling_seconds with
// --metrics=extensive): the same names, help texts, label sets, buckets,
// pre-initialised series and counting (TestGRPCMetricsMatchLibrary drives
// both with the same calls and compares what they export).
//
// It differs in how a call is counted: the library builds a reporter per
// call (two allocations), hashes three or four label values per series on
// every count (four series per unary call) and reads the clock three
// times, which showed in the profiles of a put and a serializable range
// (docs/performance.md, "Measurements behind the code"). Here the series
// of every method registered
// before initialize are looked up once, so counting a call is a map read
// by its method name and four atomic adds; the clock is read only for the
// histogram. Methods registered after initialize (the lock and election
// services, which etcd does not pre-initialise either) take the
// library's way: their series are created when first counted.
type grpcServerMetrics struct {
	started, handled, received, sent *prometheus.CounterVec
	handling                         *prometheus.HistogramVec // nil unless extensive

	// methods holds the series of each method by its full name
	// ("/etcdserverpb.KV/Range"); written by initialize before the server
	// serves, read-only afterwards.
	methods map[string]*methodSeries
}

// numCodes is the number of gRPC codes the library pre-initialises
// grpc_server_handled_total for (OK to Unauthenticated).
const numCodes = int(codes.Unauthenticated) + 1

// methodSeries are one method's series, looked up once.
type methodSeries struct {
	service, method string
	started         prometheus.Counter
	received, sent  prometheus.Counter
	handled         [numCodes]prometheus.Counter
	handling        prometheus.Observer // nil unless extensive
}

func newGRPCServerMetrics(extensive bool) *grpcServerMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &grpcServerMetrics{
		started: counter("grpc_server_started_total", "Total number of RPCs started on the server.",
			"grpc_type", "grpc_service", "grpc_method"),
		handled: counter("grpc_server_handled_total", "Total number of RPCs completed on the server, regardless of success or failure.",
			"grpc_type", "grpc_service", "grpc_method", "grpc_code"),
		received: counter("grpc_server_msg_received_total", "Total number of RPC stream messages received on the server.",
			"grpc_type", "grpc_service", "grpc_method"),
		sent: counter("grpc_server_msg_sent_total", "Total number of gRPC stream messages sent by the server.",
			"grpc_type", "grpc_service", "grpc_method"),
		methods: map[string]*methodSeries{},
	}
	if extensive {
		m.handling = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grpc_server_handling_seconds",
			Help:    "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
			Buckets: prometheus.DefBuckets,
		}, []string{"grpc_type", "grpc_service", "grpc_method"})
	}
	return m
}

// vectors are the family's collectors, the handling histogram only with
// --metrics=extensive.
func (m *grpcServerMetrics) vectors() []prometheus.Collector {
	vs := []prometheus.Collector{m.started, m.handled, m.received, m.sent}
	if m.handling != nil {
		vs = append(vs, m.handling)
	}
	return vs
}

// Describe and Collect make it one prometheus.Collector.
func (m *grpcServerMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range m.vectors() {
		v.Describe(ch)
	}
}

func (m *grpcServerMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, v := range m.vectors() {
		v.Collect(ch)
	}
}

// initialize creates, at zero, the series of every method registered on
// gs so far (the library's InitializeMetrics: started, both message
// counters, the histogram, and handled for each code), and keeps them for
// counting. Call it before gs serves.
func (m *grpcServerMetrics) initialize(gs *grpc.Server) {
	for service, info := range gs.GetServiceInfo() {
		for _, mi := range info.Methods {
			typ := grpcType(mi.IsClientStream, mi.IsServerStream)
			s := &methodSeries{
				service: service, method: mi.Name,
				started:  m.started.WithLabelValues(typ, service, mi.Name),
				received: m.received.WithLabelValues(typ, service, mi.Name),
				sent:     m.sent.WithLabelValues(typ, service, mi.Name),
			}
			if m.handling != nil {
				s.handling = m.handling.WithLabelValues(typ, service, mi.Name)
			}
			for c := range s.handled {
				s.handled[c] = m.handled.WithLabelValues(typ, service, mi.Name, codes.Code(c).String())
			}
			m.methods["/"+service+"/"+mi.Name] = s
		}
	}
}

// grpcType is the grpc_type label of a method.
func grpcType(clientStream, serverStream bool) string {
	switch {
	case clientStream && serverStream:
		return "bidi_stream"
	case clientStream:
		return "client_stream"
	case serverStream:
		return "server_stream"
	}
	return "unary"
}

// call is the counting of one call: its method's series when they were
// initialised, or its labels to look them up on each count.
type call struct {
	m     *grpcServerMetrics
	s     *methodSeries // nil: look up by the labels below
	typ   string
	svc   string
	meth  string
	start time.Time // set only with the histogram
}

func (m *grpcServerMetrics) begin(fullMethod, typ string) call {
	c := call{m: m, s: m.methods[fullMethod], typ: typ}
	if c.s == nil {
		c.svc, c.meth = splitMethod(fullMethod)
	}
	if m.handling != nil {
		c.start = time.Now()
	}
	if c.s != nil {
		c.s.started.Inc()
	} else {
		m.started.WithLabelValues(c.typ, c.svc, c.meth).Inc()
	}
	return c
}

func (c *call) received() {
	if c.s != nil {
		c.s.received.Inc()
	} else {
		c.m.received.WithLabelValues(c.typ, c.svc, c.meth).Inc()
	}
}

func (c *call) sent() {
	if c.s != nil {
		c.s.sent.Inc()
	} else {
		c.m.sent.WithLabelValues(c.typ, c.svc, c.meth).Inc()
	}
}

// end counts the call handled with err's code, and observes its duration.
func (c *call) end(err error) {
	code := grpcCode(err)
	if c.s != nil && int(code) < numCodes {
		c.s.handled[code].Inc()
	} else {
		svc, meth := c.svc, c.meth
		if c.s != nil {
			svc, meth = c.s.service, c.s.method
		}
		c.m.handled.WithLabelValues(c.typ, svc, meth, code.String()).Inc()
	}
	if c.m.handling == nil {
		return
	}
	d := time.Since(c.start).Seconds()
	if c.s != nil {
		c.s.handling.Observe(d)
	} else {
		c.m.handling.WithLabelValues(c.typ, c.svc, c.meth).Observe(d)
	}
}

// grpcCode is the code the library labels a call's end with: the gRPC
// status of err (wrapped or not), a context error's code, Unknown for
// anything else, OK for nil.
func grpcCode(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return status.FromContextError(err).Code()
}

// splitMethod splits "/service/method" as the library does ("unknown"
// twice when there is no second slash).
func splitMethod(fullMethod string) (service, method string) {
	fullMethod = strings.TrimPrefix(fullMethod, "/")
	if i := strings.Index(fullMethod, "/"); i >= 0 {
		return fullMethod[:i], fullMethod[i+1:]
	}
	return "unknown", "unknown"
}

// unary counts a unary call as the library does: started, one message
// received, the handler, one message sent (also after an error), handled.
func (m *grpcServerMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c := m.begin(info.FullMethod, "unary")
	c.received()
	resp, err := handler(ctx, req)
	c.sent()
	c.end(err)
	return resp, err
}

// stream counts a streaming call: started, every message received and
// sent (failed ones too, as the library counts them), handled at its end.
func (m *grpcServerMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c := m.begin(info.FullMethod, grpcType(info.IsClientStream, info.IsServerStream))
	err := handler(srv, &countedStream{ServerStream: ss, c: &c})
	c.end(err)
	return err
}

// countedStream counts the messages of one stream.
type countedStream struct {
	grpc.ServerStream
	c *call
}

func (s *countedStream) SendMsg(msg any) error {
	err := s.ServerStream.SendMsg(msg)
	s.c.sent()
	return err
}

func (s *countedStream) RecvMsg(msg any) error {
	err := s.ServerStream.RecvMsg(msg)
	s.c.received()
	return err
}
