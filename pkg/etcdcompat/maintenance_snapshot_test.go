package etcdcompat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/format/backup"
	"github.com/metastore-io/metastore/internal/memory"
)

// fakeSnapshotMember serves a scripted snapshot image.
type fakeSnapshotMember struct {
	Member // nil; only Snapshot is called
	open   func() (SnapshotImage, error)
}

func (f *fakeSnapshotMember) Snapshot(context.Context) (SnapshotImage, error) { return f.open() }

// scriptedImage announces size and writes data in writes of step bytes,
// then returns failAfter's error if set.
type scriptedImage struct {
	size      int64
	data      []byte
	step      int
	failAfter error
	released  bool
}

func (i *scriptedImage) Size() int64 { return i.size }
func (i *scriptedImage) Release()    { i.released = true }
func (i *scriptedImage) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for rest := i.data; len(rest) > 0; {
		chunk := rest[:min(i.step, len(rest))]
		m, err := w.Write(chunk)
		n += int64(m)
		if err != nil {
			return n, err
		}
		rest = rest[len(chunk):]
	}
	return n, i.failAfter
}

// fileOf returns a body of n bytes followed by its sha256 digest.
func fileOf(n int) []byte {
	body := make([]byte, n)
	for i := range body {
		body[i] = byte(i * 7)
	}
	sum := sha256.Sum256(body)
	return append(body, sum[:]...)
}

func newMaintenanceClient(t *testing.T, m Member) pb.MaintenanceClient {
	t.Helper()
	return pb.NewMaintenanceClient(serveInMemory(t, func(gs *grpc.Server) {
		pb.RegisterMaintenanceServer(gs, &maintenanceService{srv: m, hdr: headerFiller{srv: m}})
	}))
}

// receiveAll reads the stream to its end and returns the messages and the
// error that ended it (nil for a clean end).
func receiveAll(t *testing.T, c pb.MaintenanceClient) ([]*pb.SnapshotResponse, error) {
	t.Helper()
	stream, err := c.Snapshot(testCtx(t), &pb.SnapshotRequest{})
	if err != nil {
		return nil, err
	}
	var msgs []*pb.SnapshotResponse
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		msgs = append(msgs, resp)
	}
}

func TestSnapshotStreamsEtcdsMessageSequence(t *testing.T) {
	for _, bodyLen := range []int{512, 2 * snapshotChunkSize, 100 * 512} {
		for _, step := range []int{1000, snapshotChunkSize, 1 << 20} {
			t.Run(fmt.Sprintf("body%d/write%d", bodyLen, step), func(t *testing.T) {
				data := fileOf(bodyLen)
				img := &scriptedImage{size: int64(len(data)), data: data, step: step}
				c := newMaintenanceClient(t, &fakeSnapshotMember{open: func() (SnapshotImage, error) { return img, nil }})
				msgs, err := receiveAll(t, c)
				if err != nil {
					t.Fatal(err)
				}
				wantBlobs := (bodyLen + snapshotChunkSize - 1) / snapshotChunkSize
				if len(msgs) != wantBlobs+1 {
					t.Fatalf("%d messages, want %d blobs and the digest", len(msgs), wantBlobs)
				}
				var got []byte
				sent := 0
				for i, msg := range msgs {
					if msg.Version != StorageVersion || msg.Header != nil {
						t.Fatalf("message %d: version %q header %v, want %q and no header", i, msg.Version, msg.Header, StorageVersion)
					}
					got = append(got, msg.Blob...)
					if i == len(msgs)-1 {
						if !bytes.Equal(msg.Blob, data[bodyLen:]) || msg.RemainingBytes != 0 {
							t.Fatalf("last message: %d bytes, remaining %d; want the digest alone, remaining 0", len(msg.Blob), msg.RemainingBytes)
						}
						continue
					}
					sent += len(msg.Blob)
					wantLen := min(snapshotChunkSize, bodyLen-(sent-len(msg.Blob)))
					if len(msg.Blob) != wantLen || msg.RemainingBytes != uint64(bodyLen-sent) {
						t.Fatalf("message %d: %d bytes, remaining %d; want %d bytes, remaining %d", i, len(msg.Blob), msg.RemainingBytes, wantLen, bodyLen-sent)
					}
				}
				if !bytes.Equal(got, data) {
					t.Fatal("the messages do not add up to the image")
				}
				if !img.released {
					t.Fatal("image not released")
				}
			})
		}
	}
}

func TestSnapshotOfARealStoreVerifies(t *testing.T) {
	b := memory.New()
	batch := b.NewBatch()
	for i := range 3000 {
		batch.Put(fmt.Appendf(nil, "key-%05d", i), bytes.Repeat([]byte("v"), i%100))
	}
	if err := batch.Commit(); err != nil {
		t.Fatal(err)
	}
	view := b.ReadView()
	defer view.Release()
	var file bytes.Buffer
	if _, err := backup.Write(&file, view); err != nil {
		t.Fatal(err)
	}
	img := &scriptedImage{size: int64(file.Len()), data: file.Bytes(), step: 64 << 10}
	c := newMaintenanceClient(t, &fakeSnapshotMember{open: func() (SnapshotImage, error) { return img, nil }})
	msgs, err := receiveAll(t, c)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, msg := range msgs {
		got = append(got, msg.Blob...)
	}
	if _, err := backup.Verify(bytes.NewReader(got), int64(len(got))); err != nil {
		t.Fatalf("received file does not verify: %v", err)
	}
}

func TestSnapshotErrorsAreEtcds(t *testing.T) {
	data := fileOf(3 * snapshotChunkSize)
	cases := map[string]struct {
		open       func() (SnapshotImage, error)
		want       error
		wantBlobs  int
		anyFailure bool
	}{
		"member stopping": {
			open: func() (SnapshotImage, error) { return nil, membererr.ErrStopped },
			want: rpctypes.ErrGRPCStopped,
		},
		"member stops while streaming": {
			open: func() (SnapshotImage, error) {
				return &scriptedImage{size: int64(len(data)), data: data[:2*snapshotChunkSize], step: 4096, failAfter: membererr.ErrStopped}, nil
			},
			want:      rpctypes.ErrGRPCStopped,
			wantBlobs: 2,
		},
		"image shorter than announced": {
			open: func() (SnapshotImage, error) {
				return &scriptedImage{size: int64(len(data)), data: data[:len(data)-1], step: 4096}, nil
			},
			wantBlobs:  3,
			anyFailure: true,
		},
		"image longer than announced": {
			open: func() (SnapshotImage, error) {
				return &scriptedImage{size: int64(len(data) - 1), data: data, step: 4096}, nil
			},
			wantBlobs:  3,
			anyFailure: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := newMaintenanceClient(t, &fakeSnapshotMember{open: tc.open})
			msgs, err := receiveAll(t, c)
			if tc.anyFailure {
				if err == nil {
					t.Fatal("stream ended cleanly")
				}
			} else {
				wantStatus(t, err, tc.want)
			}
			if len(msgs) != tc.wantBlobs {
				t.Fatalf("%d messages before the error, want %d (and never a digest)", len(msgs), tc.wantBlobs)
			}
		})
	}
}
