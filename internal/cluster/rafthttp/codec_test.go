package rafthttp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func entries(term uint64, from, to uint64) []raftpb.Entry {
	var out []raftpb.Entry
	for i := from; i <= to; i++ {
		out = append(out, raftpb.Entry{Term: term, Index: i, Type: raftpb.EntryNormal, Data: []byte{byte(i), 'x'}})
	}
	return out
}

// TestMessageEncodingBytes pins the package doc's worked example.
func TestMessageEncodingBytes(t *testing.T) {
	var b bytes.Buffer
	if err := NewMessageEncoder(&b).Encode(&raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 5}); err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 0, 0, 0, 0, 0x14, 0x08, 0x08, 0x10, 0x01, 0x18, 0x02, 0x20, 0x05,
		0x28, 0, 0x30, 0, 0x40, 0, 0x50, 0, 0x58, 0, 0x68, 0}
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("encoded % x\nwant    % x", b.Bytes(), want)
	}
}

func TestMessageStreamRoundTrip(t *testing.T) {
	msgs := []raftpb.Message{
		{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 5, Commit: 9},
		LinkHeartbeat,
		{Type: raftpb.MsgVote, From: 3, To: 1, Term: 6, LogTerm: 5, Index: 40},
		{Type: raftpb.MsgApp, From: 2, To: 1, Term: 6, LogTerm: 6, Index: 40, Commit: 40, Entries: entries(6, 41, 43)},
		{Type: raftpb.MsgReadIndex, From: 1, To: 2, Entries: []raftpb.Entry{{Data: []byte("ctx")}}},
	}
	var b bytes.Buffer
	enc := NewMessageEncoder(&b)
	for i := range msgs {
		if err := enc.Encode(&msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	dec := NewMessageDecoder(&b, 0)
	for i, want := range msgs {
		got, err := dec.Decode()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("message %d: got %+v, want %+v", i, got, want)
		}
	}
	if _, err := dec.Decode(); err != io.EOF {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
}

// TestAppStreamFrames follows the package doc's worked example: which
// messages take the short entries frame, and what the reader rebuilds.
func TestAppStreamFrames(t *testing.T) {
	msgs := []raftpb.Message{
		{Type: raftpb.MsgApp, From: 2, To: 1, Term: 3, LogTerm: 3, Index: 10, Commit: 10, Entries: entries(3, 11, 12)},
		{Type: raftpb.MsgApp, From: 2, To: 1, Term: 3, LogTerm: 3, Index: 12, Commit: 12, Entries: entries(3, 13, 13)},
		LinkHeartbeat,
		{Type: raftpb.MsgApp, From: 2, To: 1, Term: 3, LogTerm: 3, Index: 13, Commit: 13},                             // empty: commit only
		{Type: raftpb.MsgApp, From: 2, To: 1, Term: 3, LogTerm: 2, Index: 7, Commit: 13, Entries: entries(3, 8, 9)},   // after a rejection
		{Type: raftpb.MsgApp, From: 2, To: 1, Term: 4, LogTerm: 3, Index: 9, Commit: 13, Entries: entries(4, 10, 10)}, // new term
		{Type: raftpb.MsgApp, From: 2, To: 1, Term: 4, LogTerm: 4, Index: 10, Commit: 10, Entries: entries(4, 11, 11)},
	}
	// After the new-term full frame both sides stand at (4, 10), so the
	// last MsgApp is an entries frame again.
	wantKinds := []byte{appFrameMessage, appFrameEntries, appFrameLinkHeartbeat, appFrameEntries,
		appFrameMessage, appFrameMessage, appFrameEntries}

	var b bytes.Buffer
	enc := NewAppEncoder(&b)
	var kinds []byte
	var frames [][]byte
	for i := range msgs {
		start := b.Len()
		if err := enc.Encode(&msgs[i]); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, b.Bytes()[start])
		frames = append(frames, slices.Clone(b.Bytes()[start:]))
	}
	if !bytes.Equal(kinds, wantKinds) {
		t.Fatalf("frame kinds %v, want %v", kinds, wantKinds)
	}
	// The second frame, as the package doc draws it: 01, count 1, the
	// entry's length and bytes, commit 12.
	ent, _ := msgs[1].Entries[0].Marshal()
	want := []byte{appFrameEntries}
	want = binary.BigEndian.AppendUint64(want, 1)
	want = binary.BigEndian.AppendUint64(want, uint64(len(ent)))
	want = append(want, ent...)
	want = binary.BigEndian.AppendUint64(want, 12)
	if !bytes.Equal(frames[1], want) {
		t.Fatalf("entries frame % x\nwant          % x", frames[1], want)
	}

	dec := NewAppDecoder(&b, 1, 2, 0)
	for i, want := range msgs {
		got, err := dec.Decode()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("message %d: got %+v\nwant %+v", i, got, want)
		}
	}
	if _, err := dec.Decode(); err != io.EOF {
		t.Fatalf("after the last message: %v, want io.EOF", err)
	}
}

func TestDecodersRefuseDamage(t *testing.T) {
	var full bytes.Buffer
	m := raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Term: 3, LogTerm: 3, Index: 10, Entries: entries(3, 11, 12)}
	if err := NewAppEncoder(&full).Encode(&m); err != nil {
		t.Fatal(err)
	}
	huge := append([]byte{appFrameMessage}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	// A length just over the preallocation bound, with 3 bytes behind it.
	long := binary.BigEndian.AppendUint64([]byte{appFrameMessage}, preallocLimit+1)
	long = append(long, 1, 2, 3)
	manyEntries := append([]byte{appFrameEntries}, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	for _, tc := range []struct {
		name string
		in   []byte
		want error // nil: any error but io.EOF
	}{
		{"cut inside a frame", full.Bytes()[:full.Len()-3], io.ErrUnexpectedEOF},
		{"cut after the kind", full.Bytes()[:1], io.ErrUnexpectedEOF},
		{"length over the limit", huge, ErrTooLarge},
		{"count with no entries behind it", manyEntries, io.ErrUnexpectedEOF},
		{"long message cut short", long, io.ErrUnexpectedEOF},
		{"unknown kind", []byte{7}, nil},
		{"not a message", append([]byte{appFrameMessage, 0, 0, 0, 0, 0, 0, 0, 2}, 0xff, 0xff), nil},
	} {
		_, err := NewAppDecoder(bytes.NewReader(tc.in), 1, 2, 4<<20).Decode()
		if err == nil || err == io.EOF || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	msg := append([]byte{0, 0, 0, 0, 0, 0, 0, 3}, 0xff, 0xff, 0xff)
	if _, err := NewMessageDecoder(bytes.NewReader(msg), 0).Decode(); err == nil {
		t.Error("message decoder accepted bytes that are not a message")
	}
	if _, err := NewMessageDecoder(bytes.NewReader(huge[1:]), 1<<20).Decode(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("message decoder: %v, want ErrTooLarge", err)
	}
}

// FuzzAppDecoder: any bytes end in messages or an error, never a panic
// or an allocation the input does not pay for.
func FuzzAppDecoder(f *testing.F) {
	var b bytes.Buffer
	enc := NewAppEncoder(&b)
	for _, m := range []raftpb.Message{
		{Type: raftpb.MsgApp, Term: 3, LogTerm: 3, Index: 10, Entries: entries(3, 11, 12)},
		{Type: raftpb.MsgApp, Term: 3, LogTerm: 3, Index: 12, Commit: 12, Entries: entries(3, 13, 13)},
		LinkHeartbeat,
	} {
		if err := enc.Encode(&m); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(b.Bytes())
	f.Add([]byte{appFrameEntries, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewAppDecoder(bytes.NewReader(data), 1, 2, 1<<16)
		for i := 0; i <= len(data); i++ {
			if _, err := dec.Decode(); err != nil {
				return
			}
		}
		t.Fatal("more messages than input bytes")
	})
}

func FuzzMessageDecoder(f *testing.F) {
	var b bytes.Buffer
	enc := NewMessageEncoder(&b)
	for _, m := range []raftpb.Message{{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 5}, LinkHeartbeat} {
		if err := enc.Encode(&m); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := NewMessageDecoder(bytes.NewReader(data), 1<<16)
		for i := 0; i <= len(data); i++ {
			if _, err := dec.Decode(); err != nil {
				return
			}
		}
		t.Fatal("more messages than input bytes")
	})
}
