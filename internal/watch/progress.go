package watch

import "time"

// Progress notifications. Every function here but progressTick runs with
// Hub.mu held.
//
// A progress notification claims that its header revision P has been fully
// delivered: every event at or below P that a watcher wants is queued
// before it. P is the fan-out point (Hub.fanRev). etcd's rules decide
// whether one is sent: only if the watchers concerned are synced and the
// revision to report (for a request, the one published when it came, as
// etcd answers with the store's revision of that moment) has reached their
// start_revision. Because the fan-out runs behind Publish, two more
// conditions make a request wait (rather than be dropped) until the
// fan-out catches up: P must reach that revision, and what each watcher of
// the stream has already been told (a watch created after the fan-out
// point was given a later revision), so that revisions never go back.

type progressVerdict uint8

const (
	progressDrop progressVerdict = iota
	progressWait
	progressSend
)

// progressVerdictLocked applies the rules to one watcher for a
// notification that must report at least rev.
func (h *Hub) progressVerdictLocked(w *watcher, rev int64) progressVerdict {
	switch {
	case w.state != stateSynced || rev < w.startRev:
		return progressDrop
	case h.fanRev < rev || h.fanRev < w.minRev-1:
		return progressWait
	}
	return progressSend
}

// answerProgressLocked answers the stream's pending progress requests
// (watch ID -1, one response per request), or drops them, or reports that
// they must wait for the fan-out.
func (h *Hub) answerProgressLocked(s *Stream) (waiting bool) {
	verdict := progressSend
	if len(s.watchers) == 0 {
		verdict = progressDrop // etcd sends nothing to a stream without watches
	}
	for _, w := range s.watchers {
		if verdict == progressDrop {
			break
		}
		verdict = min(verdict, h.progressVerdictLocked(w, s.progressTarget))
	}
	switch verdict {
	case progressWait:
		return true
	case progressSend:
		for range s.progressAsked {
			s.pushControl(Response{WatchID: InvalidWatchID, Revision: h.fanRev})
		}
	}
	s.progressAsked = 0
	return false
}

// retryProgressLocked re-examines the waiting requests after a fan-out
// pass moved the fan-out point.
func (h *Hub) retryProgressLocked() {
	kept := h.progressQ[:0]
	for _, s := range h.progressQ {
		if !s.gone && s.progressAsked > 0 && h.answerProgressLocked(s) {
			kept = append(kept, s)
			continue
		}
		s.progressQueued = false
	}
	clear(h.progressQ[len(kept):])
	h.progressQ = kept
}

// startProgressTimerLocked starts the periodic notifications of a stream
// that has its first progress_notify watcher.
func (h *Hub) startProgressTimerLocked(s *Stream) {
	if s.progressEvery == 0 {
		s.progressEvery = jitteredInterval(h.progress)
	}
	s.progressTimer = time.AfterFunc(s.progressEvery, func() { h.progressTick(s) })
}

// progressTick is etcd's periodic progress: each progress_notify watcher
// that was sent no event since the previous tick is sent a notification
// with its own watch ID, if the rules allow one now.
func (h *Hub) progressTick(s *Stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.gone || h.closed || s.progressUsers == 0 {
		s.progressTimer = nil
		return
	}
	for _, w := range s.watchers {
		if !w.progressNotify {
			continue
		}
		if w.quiet && h.progressVerdictLocked(w, h.fanRev) == progressSend {
			s.pushControl(Response{WatchID: w.id, Revision: h.fanRev})
		}
		w.quiet = true
	}
	s.progressTimer.Reset(s.progressEvery)
}
