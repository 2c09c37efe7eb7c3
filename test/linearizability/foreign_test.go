package linearizability

import (
	"context"
	"testing"
	"time"

	"github.com/metastore-io/metastore/test/framework"
)

// TestForeignServer points a client and a watcher that know cluster A's
// ID at cluster B's member, as if B had taken a killed member's port: no
// operation enters the history, the watcher records nothing, and both
// count the foreign answers.
func TestForeignServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a := framework.NewCluster(t, framework.ClusterConfig{})
	b := framework.NewCluster(t, framework.ClusterConfig{})
	idA, idB := readClusterID(ctx, t, a), readClusterID(ctx, t, b)
	if idA == idB {
		t.Fatalf("two clusters share the ID %x", idA)
	}

	hist := newHistory()
	cl, err := newClient(0, b.Member(0).Endpoint(), idA, 1, hist)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	if cl.put(ctx, "/lin/k0") || cl.get(ctx, "/lin/k0") || cl.cas(ctx, "/lin/k0") {
		t.Error("an operation answered by a foreign server counted as done")
	}
	if n := len(hist.operations()); n != 0 {
		t.Errorf("%d operations answered by a foreign server entered the history", n)
	}
	if cl.foreign != 3 {
		t.Errorf("client counted %d foreign answers, want 3", cl.foreign)
	}

	w, err := newWatcher(0, []string{"b0"}, []string{b.Member(0).Endpoint()}, idA, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.follow(ctx, 0); err == nil {
		t.Error("a watch stream on a foreign server ended without an error")
	}
	if len(w.resps) != 0 || w.foreign != 1 {
		t.Errorf("watcher recorded %d responses and %d foreign answers, want 0 and 1", len(w.resps), w.foreign)
	}
	if _, err := fullHistory(ctx, b.Member(0).Endpoint(), idA, 1); err == nil {
		t.Error("the history read from a foreign server was accepted")
	}
}
