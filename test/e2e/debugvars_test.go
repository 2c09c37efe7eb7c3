package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestDebugVars: /debug/vars on the client URL answers a GET with one
// JSON object holding Go's expvar variables and the two etcd publishes,
// file_descriptor_limit and raft.status (raft's own status of the member,
// here a one-member cluster's leader); other methods get 405 naming GET.
func TestDebugVars(t *testing.T) {
	ctx := testContext(t, testTimeout)
	dir := t.TempDir()
	p := freePorts(t, 2)
	m := startRaw(t, dir, memberFlags(dir, "m1", p[0], p[1]))
	client := fmt.Sprintf("http://127.0.0.1:%d", p[0])
	m.waitReady(ctx, client)

	code, body, err := httpGet(ctx, client+"/debug/vars")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /debug/vars: %d %s %v", code, body, err)
	}
	var vars map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &vars); err != nil {
		t.Fatalf("/debug/vars is not one JSON object: %v\n%s", err, body)
	}
	for _, k := range []string{"cmdline", "memstats", "file_descriptor_limit", "raft.status"} {
		if _, ok := vars[k]; !ok {
			t.Errorf("/debug/vars has no %q", k)
		}
	}
	var limit int64
	if err := json.Unmarshal(vars["file_descriptor_limit"], &limit); err != nil || limit <= 0 {
		t.Errorf("file_descriptor_limit = %s, want a positive number", vars["file_descriptor_limit"])
	}
	var raftStatus struct {
		ID        string `json:"id"`
		Term      uint64 `json:"term"`
		Lead      string `json:"lead"`
		RaftState string `json:"raftState"`
	}
	if err := json.Unmarshal(vars["raft.status"], &raftStatus); err != nil {
		t.Fatalf("raft.status: %v: %s", err, vars["raft.status"])
	}
	if raftStatus.RaftState != "StateLeader" || raftStatus.ID == "" || raftStatus.Lead != raftStatus.ID || raftStatus.Term == 0 {
		t.Errorf("raft.status of a one-member cluster = %s, want its leader's", vars["raft.status"])
	}

	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, client+"/debug/vars", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodGet {
		t.Errorf("POST /debug/vars: %d, Allow %q; want 405 and Allow GET", resp.StatusCode, resp.Header.Get("Allow"))
	}
}
