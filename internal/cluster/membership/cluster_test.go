package membership

import (
	"bytes"
	"slices"
	"sort"
	"testing"

	"go.etcd.io/etcd/api/v3/membershippb"
)

// auxMap is an in-memory aux bucket store standing in for the kvstore.
type auxMap map[string][]byte

func (m auxMap) PutAux(bucket byte, key, value []byte) {
	m[string(append([]byte{bucket}, key...))] = slices.Clone(value)
}
func (m auxMap) DeleteAux(bucket byte, key []byte) { delete(m, string(append([]byte{bucket}, key...))) }
func (m auxMap) AscendAux(bucket byte, fn func(key, value []byte) bool) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k[0] == bucket {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k[1:]), m[k]) {
			break
		}
	}
	return nil
}

func TestClusterPersistsAndReloads(t *testing.T) {
	store := auxMap{}
	c := New(1, 99)
	c.Add(store, &membershippb.Member{ID: 2, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://b:2380"}, IsLearner: true}})
	c.Add(store, &membershippb.Member{ID: 1, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://a:2380"}}})
	c.SetAttributes(store, 1, &membershippb.Attributes{Name: "a", ClientUrls: []string{"http://a:2379"}})
	c.Promote(store, 2)
	c.Add(store, &membershippb.Member{ID: 3})
	c.Remove(store, 3)
	c.SetAttributes(store, 3, &membershippb.Attributes{Name: "ghost"}) // removed: ignored

	reloaded := New(1, 99)
	if err := reloaded.Load(store); err != nil {
		t.Fatal(err)
	}
	ms := reloaded.Members()
	if len(ms) != 2 || ms[0].ID != 1 || ms[1].ID != 2 {
		t.Fatalf("members after reload: %+v", ms)
	}
	if ms[0].MemberAttributes.Name != "a" || ms[0].MemberAttributes.ClientUrls[0] != "http://a:2379" {
		t.Fatalf("attributes lost: %+v", ms[0])
	}
	if reloaded.IsLearner(2) {
		t.Fatal("promotion lost")
	}
	if !reloaded.IsRemoved(3) || reloaded.Member(3) != nil {
		t.Fatal("removal lost")
	}
	// Returned members are copies.
	ms[0].MemberAttributes.Name = "changed"
	if reloaded.Member(1).MemberAttributes.Name != "a" {
		t.Fatal("Members leaked internal state")
	}
}

func TestClusterLoadRejectsGarbage(t *testing.T) {
	store := auxMap{}
	store.PutAux(Bucket, []byte{memberKeyPrefix, 0, 0, 0, 0, 0, 0, 0, 1}, bytes.Repeat([]byte{0xff}, 5))
	if err := New(1, 1).Load(store); err == nil {
		t.Fatal("Load accepted an undecodable member")
	}
	store = auxMap{}
	store.PutAux(Bucket, []byte{'x'}, nil)
	if err := New(1, 1).Load(store); err == nil {
		t.Fatal("Load accepted a malformed key")
	}
}

func TestClusterVersionPersisted(t *testing.T) {
	aux := auxMap{}
	c := New(1, 2)
	if v := c.Version(); v != "" {
		t.Fatalf("a new member list has version %q", v)
	}
	c.Add(aux, &membershippb.Member{ID: 7, RaftAttributes: &membershippb.RaftAttributes{PeerUrls: []string{"http://a:2380"}}})
	c.SetVersion(aux, "3.6.0")
	loaded := New(1, 2)
	if err := loaded.Load(aux); err != nil {
		t.Fatal(err)
	}
	if v := loaded.Version(); v != "3.6.0" {
		t.Fatalf("version after Load = %q, want 3.6.0", v)
	}
	if ms := loaded.Members(); len(ms) != 1 || ms[0].ID != 7 {
		t.Fatalf("members after Load: %v", ms)
	}
}
