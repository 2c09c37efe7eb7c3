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

func dumpHubBrief(h *Hub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Printf("pubRev=%d fanRev=%d lagStreams=%d progressQ=%d compact=%d\n", h.pubRev.Load(), h.fanRev, len(h.lagStreams), len(h.progressQ), h.hist.CompactRev())
	for s := range h.streams {
		s.mu.Lock()
		fmt.Printf(" stream asked=%d target=%d queued=%v lagging=%d bytes=%d qlen=%d behind=%v\n", s.progressAsked, s.progressTarget, s.progressQueued, len(s.lagging), s.bytes, s.queue.len(), s.behind)
		s.mu.Unlock()
		n := 0
		for _, w := range s.watchers {
			if w.state != stateSynced && n < 5 {
				n++
				fmt.Printf("  w%d state=%d minRev=%d startRev=%d\n", w.id, w.state, w.minRev, w.startRev)
			}
		}
	}
}

func dumpLag(h *Hub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lag, below := 0, 0
	for s := range h.streams {
		s.mu.Lock()
		fmt.Printf(" stream lagging=%d bytes=%d qlen=%d\n", len(s.lagging), s.bytes, s.queue.len())
		s.mu.Unlock()
		for _, w := range s.watchers {
			if w.state == stateLagging {
				lag++
				if w.minRev < h.hist.CompactRev() {
					below++
				}
			}
		}
	}
	fmt.Printf("pub=%d fan=%d lagging=%d below=%d\n", h.pubRev.Load(), h.fanRev, lag, below)
}
