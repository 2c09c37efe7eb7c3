package transport

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/metastore-io/metastore/internal/cluster/rafthttp"
)

// snapshotMessage is a MsgSnap as a leader sends it.
func snapshotMessage() raftpb.Message {
	return raftpb.Message{Type: raftpb.MsgSnap, To: 2, From: 1, Term: 5, Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{
		Index: 100, Term: 4, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}},
	}}}
}

// encodeMessages writes msgs in the "message" stream encoding.
func encodeMessages(t testing.TB, msgs ...raftpb.Message) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := rafthttp.NewMessageEncoder(&buf)
	for i := range msgs {
		if err := enc.Encode(&msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestImageReceiverChecksImage(t *testing.T) {
	image := bytes.Repeat([]byte("image!"), 1000)
	body := func(img []byte, crc uint32, extra string) io.Reader {
		b := append([]byte(nil), img...)
		b = binary.BigEndian.AppendUint32(b, crc)
		return bytes.NewReader(append(b, extra...))
	}
	sum := crc32.Checksum(image, castagnoli)
	cases := map[string]struct {
		r       io.Reader
		wantErr string
	}{
		"intact":         {body(image, sum, ""), ""},
		"bad checksum":   {body(image, sum+1, ""), "checksum mismatch"},
		"trailing bytes": {body(image, sum, "x"), "bytes after the image checksum"},
		"short image":    {bytes.NewReader(image[:100]), "receive snapshot image (100 of"},
		"no checksum":    {bytes.NewReader(image), "receive snapshot image checksum"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			n, err := (&imageReceiver{r: c.r, size: int64(len(image))}).WriteTo(&out)
			if c.wantErr == "" {
				if err != nil || n != int64(len(image)) || !bytes.Equal(out.Bytes(), image) {
					t.Fatalf("got %d bytes, %v", n, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, c.wantErr)
			}
		})
	}
}

// FuzzSnapshotRequest feeds arbitrary bodies to the snapshot receiver's
// parser: header, image and checksum.
func FuzzSnapshotRequest(f *testing.F) {
	snap := snapshotMessage()
	image := []byte("state machine image")
	valid := encodeMessages(f, snap)
	valid = binary.BigEndian.AppendUint64(valid, uint64(len(image)))
	valid = append(valid, image...)
	valid = binary.BigEndian.AppendUint32(valid, crc32.Checksum(image, castagnoli))
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(encodeMessages(f, raftpb.Message{Type: raftpb.MsgHeartbeat, To: 2, From: 1, Term: 5}))
	f.Add(binary.BigEndian.AppendUint64(encodeMessages(f, snap), 1<<62))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		m, size, err := readSnapshotHeader(r, 1<<16)
		if err != nil {
			return
		}
		if m.Type != raftpb.MsgSnap || m.Snapshot == nil || size < 0 || size > maxImageSize {
			t.Fatalf("accepted header %v with size %d", m.Type, size)
		}
		var out bytes.Buffer
		n, err := (&imageReceiver{r: r, size: size}).WriteTo(&out)
		if err == nil && (n != size || int64(out.Len()) != size) {
			t.Fatalf("accepted an image of %d bytes, declared %d", n, size)
		}
	})
}
