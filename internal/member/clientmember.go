package member

import (
	"context"

	"github.com/metastore-io/metastore/internal/server"
	"github.com/metastore-io/metastore/internal/watch"
	"github.com/metastore-io/metastore/pkg/etcdcompat"
)

// clientMember is the member as pkg/etcdcompat serves it: the Server,
// with the results etcdcompat defines in place of the internal ones. It
// embeds the Server rather than a few of its parts because it is the
// Server's public face, not a part of it: every client request reaches
// the member through it.
type clientMember struct{ *server.Server }

var (
	_ etcdcompat.Member               = clientMember{}
	_ etcdcompat.RangeStreamMember    = clientMember{}
	_ etcdcompat.ClusterVersionMember = clientMember{}
	_ etcdcompat.RaftStatusMember     = clientMember{}
	_ etcdcompat.DowngradeMember      = clientMember{}
)

func (m clientMember) HashKV(rev int64) (etcdcompat.HashKVResult, error) {
	h, err := m.Server.HashKV(rev)
	return etcdcompat.HashKVResult{Hash: h.Hash, Revision: h.Revision, CompactRevision: h.CompactRevision, HashRevision: h.HashRevision}, err
}

func (m clientMember) Status() etcdcompat.MemberStatus {
	st := m.Server.Status()
	return etcdcompat.MemberStatus{
		Leader:       st.Leader,
		Term:         st.Term,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		DBSize:       st.DBSize,
		DBSizeInUse:  st.DBSizeInUse,
		IsLearner:    st.IsLearner,
		QuotaBytes:   st.QuotaBytes,
	}
}

func (m clientMember) Snapshot(ctx context.Context) (etcdcompat.SnapshotImage, error) {
	img, err := m.Server.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return img, nil
}

func (m clientMember) NewWatchStream() etcdcompat.WatchStream {
	return &watchStream{Stream: m.Server.NewWatchStream()}
}

// watchStream is a watch hub stream as etcdcompat.WatchStream: its
// responses are converted from a buffer of the hub's own type.
type watchStream struct {
	*watch.Stream
	buf []watch.Response // reused across Next calls
}

func (s *watchStream) Next(ctx context.Context, dst []etcdcompat.WatchResponse) ([]etcdcompat.WatchResponse, error) {
	var err error
	s.buf, err = s.Stream.Next(ctx, s.buf[:0])
	for i := range s.buf {
		// The hub's type has etcdcompat's fields, one for one.
		dst = append(dst, etcdcompat.WatchResponse(s.buf[i]))
	}
	clear(s.buf) // let the events go
	return dst, err
}

var _ etcdcompat.AuthMember = clientMember{}
