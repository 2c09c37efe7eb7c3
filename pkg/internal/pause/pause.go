// Package pause waits for a while unless a context ends first: the pause
// between retries of the client SDK's watch and resync loops (pkg/config,
// pkg/discovery).
package pause

import (
	"context"
	"time"
)

// For pauses for d; it returns false if ctx ended first.
func For(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
