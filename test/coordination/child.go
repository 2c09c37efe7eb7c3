package coordination

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metastore-io/metastore/pkg/lockclient"
)

// A child holder is this test binary run again (with childEnv set) in a
// client host's network namespace: it locks one resource through
// lockclient, as an HTTP contender does, and reports what it sees on its
// stdout, one line per event with its time in unix nanoseconds (the
// namespace's clock is this host's):
//
//	start T          the lock call is being sent
//	queued T         the service said it waits in line
//	answer T         a read of the /lock stream while it waits
//	token N T        it holds the lock, fencing token N
//	lost T reason    Lost() fired (the client-side deadline, once cut off)
//	failed T error   the lock call failed
//
// It then waits until it is killed, at most childLife.
const (
	childEnv  = "COORD_CHILD"
	childLife = 3 * time.Minute
)

// runChild is the child holder's main; spec is "url type resource node".
func runChild(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 4 {
		fmt.Fprintf(os.Stderr, "bad %s=%q\n", childEnv, spec)
		return 2
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	now := func() int64 { return time.Now().UnixNano() }
	tr := http.DefaultTransport.(*http.Transport).Clone()
	client, err := lockclient.New(lockclient.Config{Endpoints: []string{f[0]}, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: answerTransport{tr}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var granted atomic.Bool
	// The held lock's stream lives on Lock's context: lockWait bounds
	// only the wait, as for the workload's contenders.
	streamCtx, endStream := context.WithCancel(withAnswers(context.Background(), func() {
		if !granted.Load() {
			say("answer %d", now())
		}
	}))
	defer endStream()
	waitTimer := time.AfterFunc(lockWait, func() {
		if !granted.Load() {
			endStream()
		}
	})
	say("start %d", now())
	l, err := client.Lock(streamCtx, lockclient.Request{Type: f[1], ResourceID: f[2], NodeID: f[3],
		OnQueued: func(int) { say("queued %d", now()) }})
	granted.Store(true)
	waitTimer.Stop()
	if err != nil {
		say("failed %d %v", now(), err)
		return 1
	}
	say("token %d %d", l.Token(), now())
	life := time.NewTimer(childLife)
	defer life.Stop()
	select {
	case <-l.Lost():
		say("lost %d %v", now(), l.Err())
	case <-life.C:
		return 0
	}
	<-life.C
	return 0
}

// childRelay records a child holder's lines in the history as a call and
// a belief of client on resource, with the child's time stamps.
type childRelay struct {
	hist     *History
	resource string
	client   string
	granted  chan *Hold    // the belief, once the child holds the lock
	lost     chan struct{} // closed when the child said it lost the lock
	done     chan struct{} // closed at the end of the child's output
	// call and hold are the relay goroutine's until done is closed.
	call *Call
	hold *Hold
}

func relayChild(hist *History, resource, client string, out io.Reader) *childRelay {
	r := &childRelay{hist: hist, resource: resource, client: client,
		granted: make(chan *Hold, 1), lost: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if err := r.line(sc.Text()); err != nil {
				fmt.Fprintf(os.Stderr, "coordination: child %s: %v\n", client, err)
			}
		}
	}()
	return r
}

// line records one line of the child's output.
func (r *childRelay) line(line string) error {
	f := strings.SplitN(line, " ", 3)
	stamp := func(i int) (time.Time, error) {
		if len(f) <= i {
			return time.Time{}, fmt.Errorf("line %q: no time", line)
		}
		ns, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("line %q: %w", line, err)
		}
		return time.Unix(0, ns), nil
	}
	timeAt := 1
	if f[0] == "token" {
		timeAt = 2
	}
	at, err := stamp(timeAt)
	if err != nil {
		return err
	}
	if f[0] != "start" && r.call == nil {
		return fmt.Errorf("line %q before start", line)
	}
	switch f[0] {
	case "start":
		r.call = r.hist.StartCallAt(r.resource, r.client, APIHTTP, OpLock, at)
	case "queued":
		r.hist.QueuedAt(r.call, at)
	case "answer":
		r.hist.AnswerAt(r.call, at)
	case "token":
		token, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
		r.hold = r.hist.GrantAt(r.call, token, 0, at)
		r.granted <- r.hold
	case "lost":
		if r.hold != nil {
			r.hist.EndHoldAt(r.hold, EndLost, strings.Join(f[2:], " "), at)
			close(r.lost)
		}
	case "failed":
		r.hist.EndCallAt(r.call, errors.New(strings.Join(f[2:], " ")), at)
	default:
		return fmt.Errorf("unknown line %q", line)
	}
	return nil
}

// finish records, once the child is dead and its output read, the end of
// what it left open: a lock call unanswered, a belief never told lost.
func (r *childRelay) finish() {
	<-r.done
	if r.call != nil && r.call.End.IsZero() {
		r.hist.EndCall(r.call, errors.New("the child holder was killed while it waited"))
	}
	if r.hold != nil {
		r.hist.EndHold(r.hold, EndKilled, "killed before it was told it lost the lock")
	}
}
