package watch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// indexModel is the brute-force reference: the set of groups, matched by
// scanning them all.
type indexModel struct {
	ix     *index
	groups map[string]*group // by describe()
}

func newIndexModel() *indexModel {
	return &indexModel{ix: newIndex(), groups: make(map[string]*group)}
}

func describe(key, end string, fromKey bool) string {
	return fmt.Sprintf("%q..%q/%v", key, end, fromKey)
}

func (m *indexModel) join(t testing.TB, key, end string, fromKey bool) {
	g, created := m.ix.join(key, end, fromKey)
	name := describe(key, end, fromKey)
	if old, ok := m.groups[name]; ok {
		if created || old != g {
			t.Fatalf("join %s: created a second group", name)
		}
		return
	}
	if !created {
		t.Fatalf("join %s: reused a group that should not exist", name)
	}
	m.groups[name] = g
}

func (m *indexModel) leave(name string) {
	m.ix.leave(m.groups[name])
	delete(m.groups, name)
}

func (m *indexModel) check(t testing.TB, key string) {
	t.Helper()
	var want, got []string
	for name, g := range m.groups {
		if g.contains([]byte(key)) {
			want = append(want, name)
		}
	}
	for _, g := range m.ix.match([]byte(key), nil) {
		got = append(got, describe(g.key, g.end, g.fromKey))
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("match %q: got %v, want %v", key, got, want)
	}
	checkTreap(t, m.ix.ranges)
}

// checkTreap verifies order, heap priorities and the subtree maxima.
func checkTreap(t testing.TB, n *rangeNode) {
	t.Helper()
	if n == nil {
		return
	}
	maxEnd, maxFrom := n.end, n.fromKey
	for _, c := range []*rangeNode{n.left, n.right} {
		if c == nil {
			continue
		}
		if c.prio > n.prio {
			t.Fatalf("heap order broken under %q", n.key)
		}
		checkTreap(t, c)
		if c.maxFromKey {
			maxFrom = true
		} else if c.maxEnd > maxEnd {
			maxEnd = c.maxEnd
		}
	}
	if n.left != nil && compareRange(n.left.key, n.left.end, n.left.fromKey, n.key, n.end, n.fromKey) >= 0 {
		t.Fatalf("order broken: %q left of %q", n.left.key, n.key)
	}
	if n.right != nil && compareRange(n.right.key, n.right.end, n.right.fromKey, n.key, n.end, n.fromKey) <= 0 {
		t.Fatalf("order broken: %q right of %q", n.right.key, n.key)
	}
	if maxFrom != n.maxFromKey || (!maxFrom && maxEnd != n.maxEnd) {
		t.Fatalf("subtree maximum of %q is %q/%v, want %q/%v", n.key, n.maxEnd, n.maxFromKey, maxEnd, maxFrom)
	}
}

// runIndexOps interprets data as a sequence of index operations over a
// small alphabet, checking every match against the model.
func runIndexOps(t testing.TB, data []byte) {
	m := newIndexModel()
	key := func(b byte) string { return strings.Repeat(string(rune('a'+b%4)), int(b/4%3)+1) }
	for len(data) >= 3 {
		opByte, a, b := data[0], data[1], data[2]
		data = data[3:]
		switch opByte % 4 {
		case 0: // single key
			m.join(t, key(a), "", false)
		case 1: // range
			lo, hi := key(a), key(b)
			if lo >= hi {
				lo, hi = hi, lo+"z"
			}
			m.join(t, lo, hi, false)
		case 2: // from key
			m.join(t, key(a), "", true)
		case 3: // leave the n-th group
			if len(m.groups) == 0 {
				continue
			}
			names := make([]string, 0, len(m.groups))
			for name := range m.groups {
				names = append(names, name)
			}
			slices.Sort(names)
			m.leave(names[int(a)%len(names)])
		}
		m.check(t, key(b))
		m.check(t, key(a)+"a")
	}
}

func TestIndexRandomOps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		data := make([]byte, 3*200)
		for i := range data {
			data[i] = byte(r.IntN(256))
		}
		runIndexOps(t, data)
	}
}

func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 0, 5, 2, 3, 0, 3, 0, 0})
	f.Add([]byte{1, 0, 9, 1, 2, 7, 1, 1, 11, 3, 1, 0, 2, 0, 0, 3, 0, 0})
	f.Add([]byte{2, 0, 0, 2, 1, 0, 2, 2, 0, 1, 3, 8, 3, 2, 0, 3, 1, 0, 3, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 3*500 {
			data = data[:3*500] // the model is quadratic
		}
		runIndexOps(t, data)
	})
}

// FuzzWatchCreate feeds arbitrary keys and ranges (as a client could send
// them) to Watch and checks that events reach exactly the watches whose
// keys contain them.
func FuzzWatchCreate(f *testing.F) {
	f.Add([]byte("a"), []byte(""), []byte("a"))
	f.Add([]byte(""), []byte{0}, []byte("zz"))
	f.Add([]byte("ab"), []byte("ac"), []byte("abc"))
	f.Add([]byte("b"), []byte("a"), []byte("b"))
	f.Add([]byte{0xff}, []byte{0}, []byte{0xff, 0})
	f.Fuzz(func(t *testing.T, key, rangeEnd, eventKey []byte) {
		if len(eventKey) == 0 {
			return // the store never writes an empty key
		}
		hist := newMemHistory()
		h := testHub(t, hist, Options{})
		c := newClient(t, h)
		id, err := c.s.Watch(&pb.WatchCreateRequest{Key: key, RangeEnd: rangeEnd})
		first := c.next()
		if err != nil {
			if !first.Canceled || first.WatchID != InvalidWatchID {
				t.Fatalf("refused watch got %s", fmtResp(first))
			}
			return
		}
		publish(h, hist, put(string(eventKey), "v"))
		wantKey := key
		if len(wantKey) == 0 {
			wantKey = []byte{0}
		}
		want := inRange(eventKey, wantKey, normalizeEnd(rangeEnd))
		got := c.sync()
		if !want {
			if len(got) != 0 {
				t.Fatalf("watch %q..%q, event on %q: got %v, want nothing", key, rangeEnd, eventKey, got)
			}
			return
		}
		if len(got) != 1 || got[0].WatchID != id || len(got[0].Events) != 1 || string(got[0].Events[0].Kv.Key) != string(eventKey) {
			t.Fatalf("watch %q..%q, event on %q: got %v, want the event", key, rangeEnd, eventKey, got)
		}
	})
}

// normalizeEnd maps a request's range_end to History's conventions.
func normalizeEnd(end []byte) []byte {
	if len(end) == 0 {
		return nil
	}
	return end
}
