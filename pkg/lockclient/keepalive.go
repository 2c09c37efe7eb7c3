package lockclient

import (
	"errors"
	"sync"
	"time"
)

// ErrKeepAliveTimeout is why a lock ends when its client-side deadline
// passes: the receipt of the stream's last line plus the validity it
// carried, or plus Config.KeepAliveTimeout from a server that reports
// none. Past it the service may already have granted the lock to someone
// else, so the lock must be taken as lost even though the stream said
// nothing.
var ErrKeepAliveTimeout = errors.New("lockclient: keep-alive timeout: no confirmation that the lock is still held")

// deadline is a held lock's client-side deadline: a timer that calls
// expire when the deadline passes without being moved. Once passed it
// stays passed, so a line read late (a backlog after the process was
// stopped) cannot make the lock valid again.
type deadline struct {
	expire func()

	mu    sync.Mutex // guards the fields below
	at    time.Time
	past  bool
	timer *time.Timer
}

// newDeadline returns a deadline at at that calls expire when it passes;
// it is not armed until start.
func newDeadline(at time.Time, expire func()) *deadline {
	return &deadline{expire: expire, at: at}
}

// start arms the deadline.
func (d *deadline) start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = time.AfterFunc(time.Until(d.at), d.check)
}

// check runs when the timer fires.
func (d *deadline) check() {
	d.mu.Lock()
	if d.past {
		d.mu.Unlock()
		return
	}
	if left := time.Until(d.at); left > 0 {
		d.timer.Reset(left)
		d.mu.Unlock()
		return
	}
	d.past = true
	d.mu.Unlock()
	d.expire()
}

// move sets the deadline to at, the newest word from the service, which
// may be earlier than the last one (a member that cannot renew reports
// less and less validity). It does nothing once the deadline passed, and
// reports whether it moved it.
func (d *deadline) move(at time.Time) bool {
	d.mu.Lock()
	if d.past {
		d.mu.Unlock()
		return false
	}
	if !time.Now().Before(d.at) { // passed; the timer is late
		d.past = true
		d.mu.Unlock()
		d.expire()
		return false
	}
	d.at = at
	d.timer.Reset(time.Until(at))
	d.mu.Unlock()
	return true
}

// stop disarms the deadline for good.
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.past = true
	if d.timer != nil {
		d.timer.Stop()
	}
}
