package kvstore

import (
	"bytes"
	"math"
	"testing"
)

func TestRevisionKeyLayout(t *testing.T) {
	k := appendRevKey(nil, revision{main: 0x0102, sub: 3}, true)
	want := []byte{'r', 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 3, 't'}
	if !bytes.Equal(k, want) {
		t.Fatalf("revision key %x, want %x", k, want)
	}
	if got := etcdRevKey(nil, k); !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 0, 1, 2, '_', 0, 0, 0, 0, 0, 0, 0, 3, 't'}) {
		t.Fatalf("etcd's layout of the key: %x", got)
	}
	// Byte order is revision order, a tombstone right after its put slot.
	a := appendRevKey(nil, revision{main: 2, sub: 9}, true)
	b := appendRevKey(nil, revision{main: 3}, false)
	c := appendRevKey(nil, revision{main: 2, sub: 9}, false)
	if bytes.Compare(c, a) >= 0 || bytes.Compare(a, b) >= 0 {
		t.Fatal("revision keys do not sort in revision order")
	}
}

// FuzzParseRevKey checks that parseRevKey accepts exactly the keys
// appendRevKey writes, and gives back what was written.
func FuzzParseRevKey(f *testing.F) {
	f.Add(appendRevKey(nil, revision{main: 1}, false))
	f.Add(appendRevKey(nil, revision{main: 7, sub: 2}, true))
	f.Add(appendRevKey(nil, revision{main: math.MaxInt64, sub: math.MaxInt64}, true))
	f.Add([]byte("r"))
	f.Add([]byte("m0000000000000000"))
	f.Add(append(appendRevKey(nil, revision{main: 1}, false), 'x'))
	f.Fuzz(func(t *testing.T, k []byte) {
		rev, tomb, err := parseRevKey(k)
		if err != nil {
			return
		}
		if rev.main < 0 || rev.sub < 0 {
			t.Fatalf("parsed a negative revision %v from %x", rev, k)
		}
		if back := appendRevKey(nil, rev, tomb); !bytes.Equal(back, k) {
			t.Fatalf("parse %x gave %v tombstone %v, which encodes as %x", k, rev, tomb, back)
		}
	})
}
