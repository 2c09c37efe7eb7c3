package watch

import (
	"fmt"
	"testing"
)

func dumpHub(t testing.TB, h *Hub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Printf("pubRev=%d fanRev=%d lagStreams=%d progressQ=%d\n", h.pubRev.Load(), h.fanRev, len(h.lagStreams), len(h.progressQ))
	for s := range h.streams {
		fmt.Printf(" stream asked=%d target=%d queued=%v\n", s.progressAsked, s.progressTarget, s.progressQueued)
		for _, w := range s.watchers {
			fmt.Printf("  w%d state=%d minRev=%d startRev=%d\n", w.id, w.state, w.minRev, w.startRev)
		}
	}
}
