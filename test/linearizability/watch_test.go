package linearizability

import (
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestCheckWatcher shows that each guarantee the watch checker names
// fails when a record breaks it.
func TestCheckWatcher(t *testing.T) {
	ev := func(key string, rev int64) *mvccpb.Event {
		return &mvccpb.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{
			Key: []byte(key), Value: []byte(fmt.Sprintf("v%d", rev)), ModRevision: rev, CreateRevision: 2, Version: rev - 1}}
	}
	// Revision 4 is a transaction that wrote two keys.
	history := []*mvccpb.Event{ev("/lin/a", 2), ev("/lin/a", 3), ev("/lin/a", 4), ev("/lin/b", 4), ev("/lin/a", 5)}
	resp := func(events ...*mvccpb.Event) watchResponse { return watchResponse{member: "m0", events: events} }
	progress := func(rev int64) watchResponse { return watchResponse{member: "m1", progress: true, revision: rev} }

	tests := []struct {
		name  string
		resps []watchResponse
		want  string // "" for a clean record
	}{
		{"clean, resumed on another member", []watchResponse{resp(history[0], history[1]), progress(3), resp(history[2:4]...), resp(history[4])}, ""},
		{"stopped early", []watchResponse{resp(history[0]), progress(2)}, ""},
		{"gap", []watchResponse{resp(history[0]), resp(history[2:]...)}, "reliable"},
		{"duplicate", []watchResponse{resp(history[0], history[1]), resp(history[1:]...)}, "unique"},
		{"out of order", []watchResponse{resp(history[1], history[0]), resp(history[2:]...)}, "ordered"},
		{"revision split", []watchResponse{resp(history[:3]...), resp(history[3:]...)}, "atomic"},
		{"event behind a bookmark", []watchResponse{resp(history[0]), progress(4), resp(history[1:]...)}, "bookmarkable"},
		{"beyond the history", []watchResponse{resp(history...), resp(ev("/lin/c", 6))}, "reliable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := checkWatcher(&watcher{id: 7, resps: tc.resps}, history)
			if tc.want == "" {
				for _, err := range errs {
					t.Errorf("clean record reported: %v", err)
				}
				return
			}
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want+":") {
					return
				}
			}
			t.Errorf("want a %q failure, got %v", tc.want, errs)
		})
	}
}
