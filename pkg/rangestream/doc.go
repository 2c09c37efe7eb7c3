// Package rangestream is the client side of etcd 3.7's RangeStream RPC
// (/etcdserverpb.KV/RangeStream), which MetaStore serves and etcd 3.6
// does not: a RangeRequest answered by a stream of RangeStreamResponse
// messages, each wrapping a RangeResponse, whose merge in order is the
// response the unary Range gives for the same request.
//
// The server reads the range in chunks at one pinned revision, so a
// range of gigabytes never has to be held by the server, nor by a client
// that handles each chunk as it arrives (Open, Stream.Recv). Intermediate
// chunks carry key-values only; the last carries the header, the last
// key-values, Count and More. Clients should not rely on that layout: Get
// merges the chunks (Merge) into the unary response.
//
//	resp, err := rangestream.Get(ctx, cli.ActiveConnection(), &pb.RangeRequest{Key: k, RangeEnd: end})
//	if status.Code(err) == codes.Unimplemented {
//		// etcd 3.6 or older, or a sort order other than by key: use Range
//	}
//
// etcd's Go API module (3.6) has no RangeStreamResponse type; Response is
// one with the same wire format, written by hand for gRPC's codec.
package rangestream
