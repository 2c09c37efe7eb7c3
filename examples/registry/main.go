// Command registry shows pkg/discovery: three gRPC servers register as
// instances of one service, a client dials "metastore:///<service>" and
// its calls are balanced over them; one instance leaves and the calls
// move to the others.
package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/metastore-io/metastore/examples/internal/connect"
	"github.com/metastore-io/metastore/pkg/discovery"
)

const service = "/examples/services/health"

func main() {
	ctx, cli, logger, done := connect.Setup()
	defer done()
	registry := discovery.NewRegistry(cli, logger)

	var regs []*discovery.Registration
	var servers []*grpc.Server
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		connect.Must(err, "listen")
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go srv.Serve(l)
		defer srv.Stop()
		servers = append(servers, srv)
		reg, err := registry.Register(ctx, service, discovery.Endpoint{Addr: l.Addr().String(), Metadata: map[string]string{"version": "1"}}, 5*time.Second)
		connect.Must(err, "register")
		regs = append(regs, reg)
		fmt.Println("registered", reg.Key())
	}

	conn, err := grpc.NewClient(discovery.Scheme+":///"+service,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(discovery.NewResolverBuilder(cli, logger)))
	connect.Must(err, "dial")
	defer conn.Close()

	callSome(ctx, conn, "three instances")

	// Watch reports every instance as added, then each change.
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	events, err := registry.Watch(watchCtx, service)
	connect.Must(err, "watch")
	for range regs {
		fmt.Println("watch:", (<-events).Type)
	}
	connect.Must(regs[0].Unregister(ctx), "unregister")
	ev := <-events
	fmt.Printf("watch: %s %s\n", ev.Type, ev.Endpoint.Addr)
	// The resolver learns of the removal through its own watch, at the
	// same moment; the server is stopped too, as a departing one would be.
	servers[0].Stop()
	callSome(ctx, conn, "two instances")

	eps, err := registry.Discover(ctx, service)
	connect.Must(err, "discover")
	fmt.Printf("Discover: %v\n", eps)
	for _, reg := range regs[1:] {
		connect.Must(reg.Unregister(ctx), "unregister")
	}
}

// callSome makes a few calls and counts which instance served each.
func callSome(ctx context.Context, conn *grpc.ClientConn, label string) {
	served := map[string]int{}
	for range 30 {
		var p peer.Peer
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
		connect.Must(err, "call")
		served[p.Addr.String()]++
	}
	fmt.Printf("%s: calls per instance %v\n", label, served)
}
