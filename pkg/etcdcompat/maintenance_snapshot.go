package etcdcompat

import (
	"crypto/sha256"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membership"
)

// snapshotChunkSize is the blob size of Snapshot's messages, etcd's
// snapshotSendBufferSize.
const snapshotChunkSize = 32 * 1024

// Snapshot streams a point-in-time image of this member's state, in
// etcd's message sequence: blobs of 32 KiB whose RemainingBytes count the
// image bytes still to come after them, then one message holding the
// sha256 digest of the image (RemainingBytes 0), every message carrying
// the storage version. `etcdctl snapshot save` writes the blobs and the
// digest to the file in that order. etcd's responses carry no header; nor
// do these.
func (m *maintenanceService) Snapshot(_ *pb.SnapshotRequest, stream pb.Maintenance_SnapshotServer) error {
	img, err := m.srv.Snapshot(stream.Context())
	if err != nil {
		return ToGRPCError(err)
	}
	defer img.Release()
	total := img.Size()
	if total < sha256.Size {
		return ToGRPCError(fmt.Errorf("snapshot of %d bytes has no digest", total))
	}
	sender := &snapshotSender{
		stream:  stream,
		version: snapshotStorageVersion(m.srv),
		imageAt: total - sha256.Size,
		buf:     make([]byte, 0, snapshotChunkSize),
	}
	if _, err := img.WriteTo(sender); err != nil {
		return ToGRPCError(err)
	}
	if sender.sent != total-sha256.Size || len(sender.buf) != sha256.Size {
		return ToGRPCError(fmt.Errorf("snapshot ended after %d of %d bytes", sender.sent+int64(len(sender.buf)), total))
	}
	return sender.send(sender.buf, 0)
}

// snapshotSender cuts the file a SnapshotImage writes into Snapshot
// messages: the image (the first imageAt bytes) into full blobs, the
// digest after it into a message of its own.
type snapshotSender struct {
	stream pb.Maintenance_SnapshotServer
	// version is the storage version every message carries.
	version string
	// imageAt is the image's length; the digest follows it.
	imageAt int64
	// sent counts the image bytes sent so far.
	sent int64
	// buf collects the next blob, or, once the image is sent, the digest.
	// It is reused: Send marshals the message before it returns.
	buf []byte
}

var errSnapshotTooLong = errors.New("snapshot image longer than announced")

func (s *snapshotSender) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if s.sent == s.imageAt {
			// Only the digest is left; it is sent once WriteTo is done.
			if len(s.buf)+len(p) > sha256.Size {
				return written, errSnapshotTooLong
			}
			s.buf = append(s.buf, p...)
			return written + len(p), nil
		}
		room := min(int64(cap(s.buf)-len(s.buf)), s.imageAt-s.sent-int64(len(s.buf)))
		n := int(min(room, int64(len(p))))
		s.buf = append(s.buf, p[:n]...)
		p, written = p[n:], written+n
		if len(s.buf) == cap(s.buf) || s.sent+int64(len(s.buf)) == s.imageAt {
			s.sent += int64(len(s.buf))
			if err := s.send(s.buf, uint64(s.imageAt-s.sent)); err != nil {
				return written, err
			}
			s.buf = s.buf[:0]
		}
	}
	return written, nil
}

func (s *snapshotSender) send(blob []byte, remaining uint64) error {
	return s.stream.Send(&pb.SnapshotResponse{RemainingBytes: remaining, Blob: blob, Version: s.version})
}

// snapshotStorageVersion is the storage version of the file a Snapshot
// sends, as etcd reads it from the backend it sends: StorageVersion,
// or none while the cluster is downgraded to 3.5 (the file is in etcd
// 3.5's schema then, and etcdctl prints no "Server version").
func snapshotStorageVersion(m Member) string {
	if v := storageVersionOf(m); membership.PredatesStorageVersion(v) {
		return ""
	}
	return StorageVersion
}
