// Package validation holds the coord module's ValidationError, shared by
// its lock, registry and config packages so that one errors.As target
// catches a refused request from any of them.
package validation

import "fmt"

// Error is a request refused before reaching the store.
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }
