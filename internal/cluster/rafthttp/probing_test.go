package rafthttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestProbingAnswersAsEtcd(t *testing.T) {
	before := time.Now()
	rec := httptest.NewRecorder()
	ProbingHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ProbingPath, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	// The fields etcd's prober decodes, by their Go names.
	var got struct {
		OK  bool
		Now time.Time
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("answer %q: %v", rec.Body.String(), err)
	}
	if !got.OK || got.Now.Before(before.Add(-time.Second)) || got.Now.After(time.Now().Add(time.Second)) {
		t.Fatalf("answer %+v, want OK and the member's clock", got)
	}
}
