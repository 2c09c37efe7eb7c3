package lockservice

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/metastore-io/metastore/pkg/lockapi"
)

// stream writes the JSON lines of one /lock answer. Every write carries a
// deadline, so a client that stops reading (its host gone, its buffers
// full) fails the write within the timeout, which counts as a disconnect.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	enc     *json.Encoder
}

func newStream(w http.ResponseWriter, timeout time.Duration) *stream {
	h := w.Header()
	h.Set("Content-Type", lockapi.ContentTypeStream)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w, rc: http.NewResponseController(w), timeout: timeout, enc: json.NewEncoder(w)}
}

func (st *stream) deadline() {
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		_ = err // the write below reports a broken connection
	}
}

// send writes one event and flushes it to the client.
func (st *stream) send(ev lockapi.Event) error {
	st.deadline()
	if err := st.enc.Encode(ev); err != nil {
		return err
	}
	return st.rc.Flush()
}

// heartbeat writes a blank line, which JSON-lines readers skip.
func (st *stream) heartbeat() error {
	st.deadline()
	if _, err := st.w.Write([]byte("\n")); err != nil {
		return err
	}
	return st.rc.Flush()
}
