package lockservice

import (
	"bytes"
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
	// report sends "held" events with the validity instead of blank
	// keep-alives (lockapi.LockRequest.ReportValidity).
	report bool
	// padding is written with each keep-alive while held: a line of
	// spaces, which readers skip, sized so that a holder that stops
	// reading fills its socket's buffers (see Config.HeartbeatPadding).
	padding []byte
}

func newStream(w http.ResponseWriter, cfg Config, report bool) *stream {
	h := w.Header()
	h.Set("Content-Type", lockapi.ContentTypeStream)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	var padding []byte
	if cfg.HeartbeatPadding > 0 {
		padding = append(bytes.Repeat([]byte(" "), cfg.HeartbeatPadding-1), '\n')
	}
	return &stream{w: w, rc: http.NewResponseController(w), timeout: cfg.WriteTimeout, enc: json.NewEncoder(w),
		report: report, padding: padding}
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

// acquired tells the client it holds the lock, for valid more when it
// asked for the validity.
func (st *stream) acquired(token int64, valid time.Duration) error {
	ev := lockapi.Event{Status: lockapi.StatusAcquired, Acquired: true, Token: token}
	if st.report {
		ev.ValidMS = valid.Milliseconds()
	}
	return st.send(ev)
}

// held writes the keep-alive of a held lock: the padding, then a blank
// line or, when the client asked for the validity, a "held" event saying
// it holds for valid more from now.
func (st *stream) held(token int64, valid time.Duration) error {
	st.deadline()
	if _, err := st.w.Write(st.padding); err != nil {
		return err
	}
	if !st.report {
		return st.heartbeat()
	}
	return st.send(lockapi.Event{Status: lockapi.StatusHeld, Acquired: true, Token: token, ValidMS: valid.Milliseconds()})
}
