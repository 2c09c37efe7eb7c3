package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func sampleMessages() []raftpb.Message {
	return []raftpb.Message{
		{Type: raftpb.MsgHeartbeat, To: 2, From: 1, Term: 5, Commit: 10},
		{Type: raftpb.MsgApp, To: 2, From: 1, Term: 5, LogTerm: 5, Index: 10, Commit: 9, Entries: []raftpb.Entry{
			{Term: 5, Index: 11, Type: raftpb.EntryNormal, Data: []byte("put a=1")},
			{Term: 5, Index: 12, Type: raftpb.EntryNormal, Data: bytes.Repeat([]byte{0xab}, 3000)},
		}},
		{Type: raftpb.MsgVote, To: 3, From: 1, Term: 6, LogTerm: 5, Index: 12},
		{Type: raftpb.MsgReadIndex, To: 1, From: 2, Context: []byte("read-7")},
		{Type: raftpb.MsgSnap, To: 2, From: 1, Term: 5, Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{
			Index: 100, Term: 4, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}},
		}}},
	}
}

func encodeFrames(t testing.TB, msgs []raftpb.Message) []byte {
	t.Helper()
	var buf []byte
	for i := range msgs {
		var err error
		if buf, err = appendFrame(buf, &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

func TestFramesRoundTrip(t *testing.T) {
	msgs := sampleMessages()
	data := encodeFrames(t, msgs)
	fr := newFrameReader(bytes.NewReader(data), 1<<20)
	total := 0
	for i := range msgs {
		var m raftpb.Message
		n, err := fr.readMessage(&m)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		total += n
		if !reflect.DeepEqual(normalize(m), normalize(msgs[i])) {
			t.Fatalf("message %d: got %+v, want %+v", i, m, msgs[i])
		}
	}
	if total != len(data) {
		t.Fatalf("read %d bytes of %d", total, len(data))
	}
	var m raftpb.Message
	if _, err := fr.readMessage(&m); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// normalize makes empty and nil slices compare equal.
func normalize(m raftpb.Message) raftpb.Message {
	if len(m.Entries) == 0 {
		m.Entries = nil
	}
	if len(m.Context) == 0 {
		m.Context = nil
	}
	for i := range m.Entries {
		if len(m.Entries[i].Data) == 0 {
			m.Entries[i].Data = nil
		}
	}
	return m
}

func TestFrameReaderRejectsDamage(t *testing.T) {
	good := encodeFrames(t, sampleMessages()[:2])
	huge := binary.BigEndian.AppendUint32(nil, 1<<30)
	cases := map[string]struct {
		data []byte
		want error
	}{
		"truncated prefix":  {good[:2], io.ErrUnexpectedEOF},
		"truncated payload": {good[:len(good)-1], io.ErrUnexpectedEOF},
		"over the limit":    {huge, errFrameTooLarge},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fr := newFrameReader(bytes.NewReader(c.data), 1<<20)
			var err error
			for err == nil {
				var m raftpb.Message
				_, err = fr.readMessage(&m)
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	// A length prefix within the limit but with few bytes behind it must
	// not allocate the whole length up front.
	lying := binary.BigEndian.AppendUint32(nil, 60<<20)
	fr := newFrameReader(bytes.NewReader(append(lying, 1, 2, 3)), 64<<20)
	if _, err := fr.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("lying prefix: %v", err)
	}
	if cap(fr.buf) > readChunk {
		t.Fatalf("decoder grew its buffer to %d bytes for 3 bytes of payload", cap(fr.buf))
	}
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

// FuzzFrameReader feeds arbitrary bytes to the stream decoder: it must
// fail cleanly, never panic or over-allocate, and whatever it decodes must
// re-encode to a frame that decodes to the same message.
func FuzzFrameReader(f *testing.F) {
	good := encodeFrames(f, sampleMessages())
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(binary.BigEndian.AppendUint32(nil, 1<<31))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 3, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), 1<<16)
		for {
			var m raftpb.Message
			if _, err := fr.readMessage(&m); err != nil {
				return
			}
			again, err := appendFrame(nil, &m)
			if err != nil {
				t.Fatalf("re-encode a decoded message: %v", err)
			}
			var m2 raftpb.Message
			if _, err := newFrameReader(bytes.NewReader(again), 1<<20).readMessage(&m2); err != nil {
				t.Fatalf("decode a re-encoded message: %v", err)
			}
			if !reflect.DeepEqual(normalize(m), normalize(m2)) {
				t.Fatalf("round trip changed the message: %+v vs %+v", m, m2)
			}
		}
	})
}

// FuzzSnapshotRequest feeds arbitrary bodies to the snapshot receiver's
// parser: header, image and checksum.
func FuzzSnapshotRequest(f *testing.F) {
	snap := sampleMessages()[4]
	image := []byte("state machine image")
	valid := encodeFrames(f, []raftpb.Message{snap})
	valid = binary.BigEndian.AppendUint64(valid, uint64(len(image)))
	valid = append(valid, image...)
	valid = binary.BigEndian.AppendUint32(valid, crc32.Checksum(image, castagnoli))
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(encodeFrames(f, sampleMessages()[:1]))
	f.Add(binary.BigEndian.AppendUint64(encodeFrames(f, []raftpb.Message{snap}), 1<<62))
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), 1<<16)
		m, size, err := readSnapshotHeader(fr)
		if err != nil {
			return
		}
		if m.Type != raftpb.MsgSnap || m.Snapshot == nil || size < 0 || size > maxImageSize {
			t.Fatalf("accepted header %v with size %d", m.Type, size)
		}
		var out bytes.Buffer
		n, err := (&imageReceiver{r: fr.r, size: size}).WriteTo(&out)
		if err == nil && (n != size || int64(out.Len()) != size) {
			t.Fatalf("accepted an image of %d bytes, declared %d", n, size)
		}
	})
}
