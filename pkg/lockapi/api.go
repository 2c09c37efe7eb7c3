// Package lockapi is the wire protocol of MetaStore's HTTP lock service
// (served by internal/lockservice on the client port, spoken by
// pkg/lockclient): the paths, the JSON requests and the events.
//
// A client locks a resource with one long-lived request:
//
//	POST /v1/lock/lock   {"Type":"pull","ResourceID":"sha256:ab12","NodeID":"node-7"}
//
// The answer is a stream of JSON lines (application/x-ndjson): zero or one
// "queued" event with the number of contenders ahead, then "acquired" with
// the fencing token, then, while the lock is held, keep-alive lines; the
// stream ends with "released", "lost" or "superseded". The lock is held
// exactly as long as this response is being read: closing the connection
// releases it (or leaves the queue). Errors found before the stream starts
// are ordinary HTTP errors with an Error body.
//
// Keep-alive lines are blank (spaces, then a newline: readers skip them),
// padded while the lock is held so that a holder that stops reading fills
// its socket's buffers and is dropped (internal/lockservice's doc gives
// the bound). A request with "ReportValidity":true gets, besides the
// padding, a "held" event in place of each keep-alive, and valid_ms on
// the acquired event: how long the holder may still believe it holds.
//
//	{"status":"acquired","acquired":true,"skip":false,"token":41,"valid_ms":3897}
//	{"status":"held","acquired":true,"skip":false,"token":41,"valid_ms":3120}
//
// A holder past receipt + valid_ms of its last line must assume the lock
// lost, whatever the stream says later; the member writes "lost" when its
// own deadline passes.
//
// The holder releases with
//
//	POST /v1/lock/unlock {"Type":"pull","ResourceID":"sha256:ab12","NodeID":"node-7","Success":true}
//
// which answers {"released":true,"token":41}, or 403 when NodeID does not
// hold the lock.
package lockapi

import (
	"errors"
	"fmt"
)

// Paths of the lock service on the client port.
const (
	PathPrefix = "/v1/lock/"
	PathLock   = PathPrefix + "lock"
	PathUnlock = PathPrefix + "unlock"
	PathStatus = PathPrefix + "status"
)

// ContentTypeStream is the media type of a /lock answer.
const ContentTypeStream = "application/x-ndjson"

// MaxFieldBytes bounds Type, ResourceID and NodeID.
const MaxFieldBytes = 512

// LockRequest is the body of POST /v1/lock/lock. The JSON names are the
// lock-server design's; Go's decoder also accepts any capitalisation.
type LockRequest struct {
	Type       string `json:"Type"`
	ResourceID string `json:"ResourceID"`
	NodeID     string `json:"NodeID"`
	// NoWait asks for an answer without queueing: 409 busy with the
	// position when someone else holds the lock. When NodeID already has
	// a place on another request, NoWait leaves it as it is and answers
	// 409 busy with that place's position (0 if it holds the lock) and
	// token, where a plain /lock would take the place over.
	NoWait bool `json:"NoWait,omitempty"`
	// ReportValidity asks for the holder's validity: the acquired event
	// and, in place of each blank keep-alive line while the lock is held,
	// a "held" event carry ValidMS. Without it the keep-alives stay blank
	// lines, because clients written before it (and scripts) take any
	// non-blank line after "acquired" for the end of the stream.
	ReportValidity bool `json:"ReportValidity,omitempty"`
}

// Validate names the first missing or oversized field.
func (r LockRequest) Validate() error {
	return validateFields(r.Type, r.ResourceID, r.NodeID)
}

func validateFields(typ, resource, node string) error {
	for _, f := range []struct{ name, value string }{{"Type", typ}, {"ResourceID", resource}, {"NodeID", node}} {
		if f.value == "" {
			return fmt.Errorf("missing parameter %s", f.name)
		}
		if len(f.value) > MaxFieldBytes {
			return fmt.Errorf("parameter %s is longer than %d bytes", f.name, MaxFieldBytes)
		}
	}
	return nil
}

// Event statuses of a /lock stream.
const (
	StatusQueued     = "queued"     // waiting; Position contenders ahead
	StatusAcquired   = "acquired"   // held; Token is the fencing token
	StatusHeld       = "held"       // still held, for ValidMS more (ReportValidity keep-alives)
	StatusReleased   = "released"   // the lock was unlocked; the stream ends
	StatusLost       = "lost"       // the lock or place expired (lease gone); the stream ends
	StatusSuperseded = "superseded" // the same NodeID asked again on another request, which owns the place now
	StatusError      = "error"      // the service failed while waiting; the stream ends
	StatusBusy       = "busy"       // NoWait and the lock is held, or NodeID already has a place (409)
)

// Event is one line of a /lock stream.
type Event struct {
	Status string `json:"status"`
	// Acquired is true on the acquired event (the design's "acquired").
	Acquired bool `json:"acquired"`
	// Skip is kept for compatibility with the design and is always false:
	// whether to do the work is the client's decision.
	Skip bool `json:"skip"`
	// Position is the number of contenders ahead (queued events).
	Position int `json:"position,omitempty"`
	// Token is the fencing token: the create revision of the contender's
	// key, strictly increasing across successive holders of a resource.
	Token int64 `json:"token,omitempty"`
	// ValidMS, on acquired and held events of a ReportValidity stream,
	// is how many milliseconds from the moment the line was written the
	// holder may go on believing it holds the lock: the member's holder
	// deadline (the send time of the last renewal the leader confirmed,
	// plus the lease TTL less the drift margin and the lock delay) minus
	// the time of writing. A client's deadline is the line's receipt time
	// plus ValidMS; past it, with no newer line, it must assume the lock
	// lost. Nobody else is granted the lock before the lock delay has
	// passed after the member's deadline, which covers the line's time in
	// transit.
	ValidMS int64  `json:"valid_ms,omitempty"`
	Error   string `json:"error,omitempty"`
}

// UnlockRequest is the body of POST /v1/lock/unlock.
type UnlockRequest struct {
	Type       string `json:"Type"`
	ResourceID string `json:"ResourceID"`
	NodeID     string `json:"NodeID"`
	// Success is the outcome of the critical section (required).
	Success *bool `json:"Success"`
	// Err says why it failed (optional, logged).
	Err string `json:"Err,omitempty"`
	// Token, when set, must be the holder's fencing token.
	Token int64 `json:"Token,omitempty"`
}

// Validate names the first missing or oversized field.
func (r UnlockRequest) Validate() error {
	if err := validateFields(r.Type, r.ResourceID, r.NodeID); err != nil {
		return err
	}
	if r.Success == nil {
		return errors.New("missing parameter Success")
	}
	return nil
}

// UnlockResponse answers /unlock (and carries the reason of an error).
type UnlockResponse struct {
	Released bool   `json:"released"`
	Token    int64  `json:"token,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ErrorResponse is the body of every error answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Participant is one contender in a status answer.
type Participant struct {
	NodeID string `json:"node_id"`
	Token  int64  `json:"token"`
}

// StatusResponse answers GET /v1/lock/status?Type=...&ResourceID=...:
// the holder (absent when free) and the waiters in order.
type StatusResponse struct {
	Holder  *Participant  `json:"holder,omitempty"`
	Waiters []Participant `json:"waiters"`
}
