package watch

// Refuse answers a create request that was not allowed (etcd refuses a
// watch on keys the user may not read this way) with a created and
// canceled response carrying reason, without creating a watcher.
func (s *Stream) Refuse(reason string) {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.gone {
		return
	}
	s.pushControl(Response{WatchID: InvalidWatchID, Revision: h.pubRev.Load(), Created: true, Canceled: true, CancelReason: reason})
}
