package etcdcompat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/metastore-io/metastore/internal/watch"
)

// memberIdentity is what the watch service needs from the member: the
// IDs and term that go in every response header.
type memberIdentity interface {
	ClusterID() uint64
	ID() uint64
	Term() uint64
}

// watchService is etcd's Watch service. Each gRPC stream is relayed to a
// member's WatchStream, which holds all of etcd's watch semantics; this
// layer only decodes requests, fills response headers and splits
// fragmented responses.
type watchService struct {
	pb.UnimplementedWatchServer
	streams watchStreams
	ids     memberIdentity
	// fragmentBytes is the size from which a response of a watch created
	// with fragment=true is split: etcd's --max-request-bytes plus its gRPC
	// overhead allowance.
	fragmentBytes int
	log           *slog.Logger
	// recvFailures and sendFailures count streams that broke other than
	// by the client going away (nil: not counted).
	recvFailures, sendFailures *lazyCounter
	// refusal, when set, is why the caller may not create a watch ("" if
	// it may; authGuard.watchRefusal); nil allows every watch.
	refusal func(ctx context.Context, r *pb.WatchCreateRequest) string
}

// watchStreams opens the member's watch streams (Member.NewWatchStream).
type watchStreams interface {
	NewWatchStream() WatchStream
}

func newWatchService(streams watchStreams, ids memberIdentity, maxRequestBytes uint, log *slog.Logger) *watchService {
	return &watchService{streams: streams, ids: ids, fragmentBytes: int(maxRequestBytes) + grpcOverheadBytes, log: log}
}

// Watch serves one client stream until the client goes away, its receive
// side fails, or the member's watch stream ends. A client that only half-closes (ends its
// send side) keeps receiving, as with etcd.
func (ws *watchService) Watch(stream pb.Watch_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	s := ws.streams.NewWatchStream()
	defer s.Close()

	recvErr := make(chan error, 1)
	go func() {
		if err := ws.recvLoop(ctx, stream, s); err != nil {
			recvErr <- err
			cancel()
		}
	}()
	err := ws.sendLoop(ctx, stream, s)
	select {
	case rerr := <-recvErr:
		err = rerr
	default:
	}
	switch {
	case errors.Is(err, context.Canceled):
		return rpctypes.ErrGRPCWatchCanceled
	case errors.Is(err, watch.ErrClosed):
		return rpctypes.ErrGRPCStopped
	}
	return err
}

// recvLoop hands the client's requests to the hub stream. It returns nil
// when the client half-closes.
func (ws *watchService) recvLoop(ctx context.Context, stream pb.Watch_WatchServer, s WatchStream) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if stream.Context().Err() == nil {
				ws.recvFailures.Inc()
			}
			return err
		}
		switch u := req.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			if u.CreateRequest != nil {
				ws.create(ctx, s, u.CreateRequest)
			}
		case *pb.WatchRequest_CancelRequest:
			if u.CancelRequest != nil {
				s.Cancel(u.CancelRequest.WatchId)
			}
		case *pb.WatchRequest_ProgressRequest:
			if u.ProgressRequest != nil {
				s.RequestProgress()
			}
		default:
			// etcd ignores what it does not understand rather than end
			// the whole stream.
			ws.log.Info("invalid watch request type received in gRPC stream", "type", fmt.Sprintf("%T", req.RequestUnion))
		}
	}
}

// create adds a watcher, unless the caller may not read the range (a
// negative start revision is refused by the hub first, as etcd does).
func (ws *watchService) create(ctx context.Context, s WatchStream, r *pb.WatchCreateRequest) {
	if ws.refusal != nil && r.StartRevision >= 0 {
		if reason := ws.refusal(ctx, r); reason != "" {
			if rs, ok := s.(refuser); ok {
				rs.Refuse(reason)
				return
			}
		}
	}
	// A refusal is answered on the stream by the hub.
	_, _ = s.Watch(r)
}

// refuser is a WatchStream that can answer a create request the caller
// may not make with a created-and-canceled response (etcd's refusal of a
// watch on keys the user may not read).
type refuser interface{ Refuse(reason string) }

// sendLoop sends the hub stream's responses in order.
func (ws *watchService) sendLoop(ctx context.Context, stream pb.Watch_WatchServer, s WatchStream) error {
	var (
		batch []WatchResponse
		// Reused for every response: what gRPC is given is the encoded
		// copy (see sendEncoded), never these.
		resp   pb.WatchResponse
		header pb.ResponseHeader
	)
	for {
		var err error
		if batch, err = s.Next(ctx, batch[:0]); err != nil {
			return err
		}
		header = pb.ResponseHeader{ClusterId: ws.ids.ClusterID(), MemberId: ws.ids.ID(), RaftTerm: ws.ids.Term()}
		for i := range batch {
			r := &batch[i]
			header.Revision = r.Revision
			resp = pb.WatchResponse{
				Header:          &header,
				WatchId:         r.WatchID,
				Created:         r.Created,
				Canceled:        r.Canceled,
				CompactRevision: r.CompactRevision,
				CancelReason:    r.CancelReason,
				Events:          r.Events,
			}
			if r.Fragment {
				err = sendFragments(&resp, ws.fragmentBytes, func(m *pb.WatchResponse) error { return sendEncoded(stream, m) })
			} else {
				err = sendEncoded(stream, &resp)
			}
			if err != nil {
				if stream.Context().Err() == nil {
					ws.sendFailures.Inc()
				}
				return err
			}
		}
		resp = pb.WatchResponse{}
		clear(batch) // let the events go
	}
}

// sendFragments sends resp whole if it is under limit bytes or has a
// single event; otherwise it splits the events over several responses,
// each under limit (or holding one event), all but the last marked
// fragment, exactly where etcd splits them.
func sendFragments(resp *pb.WatchResponse, limit int, send func(*pb.WatchResponse) error) error {
	events := resp.Events
	if len(events) < 2 {
		return send(resp)
	}
	// Sizes are computed once and summed, rather than re-measuring the
	// growing message after each event.
	resp.Events, resp.Fragment = nil, true
	base := resp.Size() // header and flags, fragment included
	total := base - fragmentFlagBytes
	sizes := make([]int, len(events))
	for i, ev := range events {
		sizes[i] = eventFieldSize(ev)
		total += sizes[i]
	}
	if total < limit {
		resp.Events, resp.Fragment = events, false
		return send(resp)
	}
	for idx := 0; idx < len(events); {
		cur := *resp
		size, start := base, idx
		for idx < len(events) && (idx == start || size+sizes[idx] < limit) {
			size += sizes[idx]
			idx++
		}
		cur.Events = events[start:idx:idx]
		cur.Fragment = idx < len(events)
		if err := send(&cur); err != nil {
			return err
		}
	}
	return nil
}

// fragmentFlagBytes is what fragment=true adds to an encoded response:
// one tag byte and one value byte.
const fragmentFlagBytes = 2

// eventFieldSize is the encoded size of one entry of WatchResponse.events
// (field 11): a one-byte tag, the length, the event.
func eventFieldSize(ev *mvccpb.Event) int {
	n := ev.Size()
	return 1 + varintSize(uint64(n)) + n
}

func varintSize(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
