package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// watchConfig is what the watch subcommand accepts.
type watchConfig struct {
	endpoint      string
	watchers      int
	streams       int
	conns         int
	window        int
	mode          string
	prefix        string
	createTimeout time.Duration
}

func (c watchConfig) validate() error {
	switch {
	case c.watchers < 1 || c.streams < 1 || c.conns < 1 || c.window < 1:
		return fmt.Errorf("-watchers, -streams, -conns and -window must be positive (got %d, %d, %d, %d)",
			c.watchers, c.streams, c.conns, c.window)
	case c.streams > c.watchers:
		return fmt.Errorf("-streams=%d is more than -watchers=%d", c.streams, c.watchers)
	case c.mode != "keys" && c.mode != "prefixes":
		return fmt.Errorf("-mode=%q: want keys or prefixes", c.mode)
	}
	return nil
}

// createRequest is watcher i's create request (see the package comment for
// the keys). Watch ID 0 lets the server pick the ID.
func (c watchConfig) createRequest(i int) *pb.WatchRequest {
	create := &pb.WatchCreateRequest{}
	if c.mode == "keys" {
		create.Key = fmt.Appendf(nil, "%s%08d", c.prefix, i)
	} else {
		create.Key = fmt.Appendf(nil, "%s%08d/", c.prefix, i)
		create.RangeEnd = prefixEnd(create.Key)
	}
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: create}}
}

// prefixEnd is the range end covering every key that starts with prefix:
// the prefix with its last byte below 0xff incremented and what follows
// dropped. The prefixes built here end in '/', so it is never all 0xff.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0} // etcd's "every key from prefix on"
}

// watchStream is one gRPC Watch stream and the watchers it carries:
// watchers [first, first+count).
type watchStream struct {
	client pb.Watch_WatchClient
	first  int
	count  int
	// inFlight holds one token per create sent and not yet acknowledged;
	// its capacity is the window.
	inFlight chan struct{}
	// allCreated is closed once every create has been acknowledged.
	allCreated chan struct{}
}

// watchAndHold opens the watchers, reports once all are created, and holds
// them until ctx ends. A stream failing at any point is an error; ctx
// ending while they are held is not.
func watchAndHold(ctx context.Context, c watchConfig, out io.Writer) error {
	if err := c.validate(); err != nil {
		return err
	}
	conns := make([]*grpc.ClientConn, c.conns)
	for i := range conns {
		conn, err := grpc.NewClient(c.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("connect to %s: %w", c.endpoint, err)
		}
		defer conn.Close()
		conns[i] = conn
	}

	// holdCtx outlives the create deadline: it carries the streams.
	holdCtx, endHold := context.WithCancel(ctx)
	defer endHold()
	failed := make(chan error, 2*c.streams) // one sender and one receiver each
	var eventsReceived atomic.Int64
	start := time.Now()
	streams := make([]*watchStream, c.streams)
	perStream, extra := c.watchers/c.streams, c.watchers%c.streams
	first := 0
	for s := range streams {
		count := perStream
		if s < extra {
			count++
		}
		client, err := pb.NewWatchClient(conns[s%len(conns)]).Watch(holdCtx)
		if err != nil {
			return fmt.Errorf("open watch stream %d: %w", s, err)
		}
		ws := &watchStream{client: client, first: first, count: count,
			inFlight: make(chan struct{}, c.window), allCreated: make(chan struct{})}
		streams[s] = ws
		first += count
		go ws.send(holdCtx, c, s, failed)
		go ws.receive(holdCtx, s, &eventsReceived, failed)
	}

	createDeadline := time.NewTimer(c.createTimeout)
	defer createDeadline.Stop()
	for s, ws := range streams {
		select {
		case <-ws.allCreated:
		case err := <-failed:
			return err
		case <-createDeadline.C:
			return fmt.Errorf("stream %d: not all %d creates acknowledged within %v", s, ws.count, c.createTimeout)
		case <-ctx.Done():
			return fmt.Errorf("interrupted while creating watchers: %w", ctx.Err())
		}
	}
	elapsed := time.Since(start)
	fmt.Fprintf(out, "watchers=%d\nstreams=%d\nconns=%d\nmode=%s\ncreate_seconds=%.2f\ncreates_per_sec=%.0f\nready\n",
		c.watchers, c.streams, c.conns, c.mode, elapsed.Seconds(), float64(c.watchers)/elapsed.Seconds())

	select {
	case err := <-failed:
		return fmt.Errorf("while holding the watchers: %w", err)
	case <-ctx.Done():
	}
	if n := eventsReceived.Load(); n > 0 {
		// Someone wrote under the prefix: the watchers were not all idle.
		fmt.Fprintf(os.Stderr, "watchmem watch: %d events arrived while holding (keys under %q were written)\n", n, c.prefix)
	}
	return nil
}

// send sends the stream's creates, at most the window in flight. It never
// half-closes the stream: the watchers are to stay.
func (ws *watchStream) send(ctx context.Context, c watchConfig, s int, failed chan<- error) {
	for i := ws.first; i < ws.first+ws.count; i++ {
		select {
		case ws.inFlight <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if err := ws.client.Send(c.createRequest(i)); err != nil {
			if ctx.Err() == nil {
				failed <- fmt.Errorf("stream %d: send create of watcher %d: %w", s, i, err)
			}
			return
		}
	}
}

// receive counts the stream's created responses until all are in, then
// keeps reading: a watcher canceled by the server, or the stream
// breaking, is a failure unless ctx has ended.
func (ws *watchStream) receive(ctx context.Context, s int, events *atomic.Int64, failed chan<- error) {
	acknowledged := 0
	for {
		resp, err := ws.client.Recv()
		if err != nil {
			if ctx.Err() == nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("server ended the stream")
				}
				failed <- fmt.Errorf("stream %d: receive: %w", s, err)
			}
			return
		}
		switch {
		case resp.Created && (resp.Canceled || resp.WatchId < 0):
			failed <- fmt.Errorf("stream %d: create refused (watch ID %d): %s", s, resp.WatchId, resp.CancelReason)
			return
		case resp.Created && acknowledged == ws.count:
			failed <- fmt.Errorf("stream %d: created response %d for %d creates", s, acknowledged+1, ws.count)
			return
		case resp.Created:
			<-ws.inFlight
			acknowledged++
			if acknowledged == ws.count {
				close(ws.allCreated)
			}
		case resp.Canceled:
			failed <- fmt.Errorf("stream %d: server canceled watch %d (compact revision %d): %s",
				s, resp.WatchId, resp.CompactRevision, resp.CancelReason)
			return
		default:
			events.Add(int64(len(resp.Events)))
		}
	}
}
