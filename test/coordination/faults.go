package coordination

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

// Fault is one injury the runner inflicts while the workload runs. The
// runner calls Inject with every member running and healthy; Inject
// hurts, keeps the hurt for its hold time, heals, and returns once the
// harm is undone (members restarted, links healed, clients back): the
// runner then waits for every member to be ready again before the next
// fault. An error is a harness failure (a member that cannot be signalled
// or restarted) and fails the run.
//
// The member and network faults of this package are memberFreeze,
// leaderFreeze, peerCut, followerKill, leaderKill and quorumLoss. The
// faults on the clients' side (faults_client.go: vanishedHost,
// stopsReading) plug in the same way: they run a holder of their own
// through Env.Hist (StartCall, Grant, EndHold, EndCall), so that the
// checker judges their beliefs beside the workload's. A fault that needs
// setting up before the workload starts is a preparedFault.
type Fault interface {
	// Name is the fault's name in logs, summaries and subtests.
	Name() string
	Inject(ctx context.Context, env *Env) error
}

// Env is what a fault may act on.
type Env struct {
	T       testing.TB
	Cluster *framework.Cluster
	Hist    *History
	// clients are bound to one member each, by name.
	clients map[string]*clientv3.Client
	// aimed are the lock calls whose holds the faults struck, for the
	// run's report.
	aimed []int
}

// newEnv builds the environment of cluster's faults.
func newEnv(t testing.TB, c *framework.Cluster, hist *History) *Env {
	e := &Env{T: t, Cluster: c, Hist: hist, clients: map[string]*clientv3.Client{}}
	for _, m := range c.Members() {
		e.clients[m.Name()] = m.NewClient(t)
	}
	return e
}

// Client is a client bound to m alone (it reconnects across restarts).
func (e *Env) Client(m *framework.Member) *clientv3.Client { return e.clients[m.Name()] }

// Leader waits until the running members agree on a leader and returns
// it with the other running members.
func (e *Env) Leader(ctx context.Context) (*framework.Member, []*framework.Member, error) {
	for {
		leader, followers, err := e.agreedLeader(ctx)
		if err == nil {
			return leader, followers, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("no agreed leader: %w (last: %w)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (e *Env) agreedLeader(ctx context.Context) (*framework.Member, []*framework.Member, error) {
	var leader *framework.Member
	var followers []*framework.Member
	var leaderID uint64
	for _, m := range e.Cluster.Members() {
		if !m.Running() {
			continue
		}
		st, err := e.status(ctx, m)
		if err != nil {
			return nil, nil, err
		}
		if st.Leader == 0 || (leaderID != 0 && st.Leader != leaderID) {
			return nil, nil, errors.New("members disagree on the leader")
		}
		leaderID = st.Leader
		if st.Header.MemberId == st.Leader {
			leader = m
		} else {
			followers = append(followers, m)
		}
	}
	if leader == nil {
		return nil, nil, errors.New("the leader is not among the running members")
	}
	return leader, followers, nil
}

// status asks m alone for its status, within a second.
func (e *Env) status(ctx context.Context, m *framework.Member) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := e.Client(m).Status(ctx, m.Endpoint())
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", m.Name(), err)
	}
	return st, nil
}

const (
	// aimTimeout bounds the wait for a long hold to aim a fault at.
	aimTimeout = 30 * time.Second
	// aimFresh is how recent a long hold's grant must be for the fault
	// to strike while most of the hold is still to come.
	aimFresh = 300 * time.Millisecond
)

// aim waits until a contender of api served by one of ms has just been
// granted a long hold, and returns that member: a freeze or cut then
// strikes a holder that goes on working past its lease. If none comes
// within aimTimeout it returns ms[0].
func (e *Env) aim(ctx context.Context, api API, ms []*framework.Member) *framework.Member {
	ctx, cancel := context.WithTimeout(ctx, aimTimeout)
	defer cancel()
	for ctx.Err() == nil {
		for _, h := range e.Hist.holding() {
			if h.Planned < longHoldMin || time.Since(h.Granted) > aimFresh || !strings.HasPrefix(h.Resource, string(api)+"/") {
				continue
			}
			_, member, _ := strings.Cut(h.Client, "@")
			for _, m := range ms {
				if m.Name() == member {
					e.aimed = append(e.aimed, h.Call)
					e.T.Logf("fault: aimed at %s, serving %s's hold of %v on %s", member, h.Client, h.Planned.Round(time.Millisecond), h.Resource)
					return m
				}
			}
		}
		pause(ctx, 20*time.Millisecond)
	}
	e.T.Logf("fault: no long %s hold on %s within %v; striking %s anyway", api, names(ms), aimTimeout, ms[0].Name())
	return ms[0]
}

func names(ms []*framework.Member) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name()
	}
	return strings.Join(out, ",")
}

// cutHold is how long a freeze or a cut lasts: past the members' request
// timeout and two lease TTLs, so that every lease the hurt member was
// renewing expires, and every call it was answering is overdue.
const cutHold = 12 * time.Second

// killHold is how long a killed member stays down.
const killHold = 4 * time.Second

// memberFreeze freezes one follower (SIGSTOP) for cutHold, aimed at a
// long HTTP hold. (The freezes aim at the HTTP service, whose client has
// no deadline of its own today; the cut at the SDK, whose has.)
type memberFreeze struct{}

func (memberFreeze) Name() string { return "member-freeze" }

func (memberFreeze) Inject(ctx context.Context, e *Env) error {
	_, followers, err := e.Leader(ctx)
	if err != nil {
		return err
	}
	return freeze(ctx, e.aim(ctx, APIHTTP, followers))
}

func freeze(ctx context.Context, m *framework.Member) error {
	if err := m.Pause(); err != nil {
		return err
	}
	pause(ctx, cutHold)
	return m.Resume()
}

// leaderFreeze freezes the leader for cutHold, aimed at a long HTTP hold,
// with a lease probe through a follower.
type leaderFreeze struct{}

func (leaderFreeze) Name() string { return "leader-freeze" }

func (f leaderFreeze) Inject(ctx context.Context, e *Env) error {
	leader, followers, err := e.Leader(ctx)
	if err != nil {
		return err
	}
	e.aim(ctx, APIHTTP, []*framework.Member{leader})
	return withLeaseProbe(ctx, e, f.Name(), followers[0], func() error { return freeze(ctx, leader) })
}

// peerCut cuts the leader's peer links for cutHold, aimed at a long SDK
// hold, with a lease probe through a follower. Odd injections isolate
// (connections closed, new ones refused), even ones stall (held open,
// nothing forwarded).
type peerCut struct{ n *int }

func (peerCut) Name() string { return "peer-cut" }

func (f peerCut) Inject(ctx context.Context, e *Env) error {
	leader, followers, err := e.Leader(ctx)
	if err != nil {
		return err
	}
	*f.n++
	isolate := *f.n%2 == 1
	net := e.Cluster.Network()
	e.aim(ctx, APISDK, []*framework.Member{leader})
	return withLeaseProbe(ctx, e, f.Name(), followers[0], func() error {
		how := "stall"
		if isolate {
			how = "isolate"
			net.Isolate(leader.Name())
		} else {
			net.Stall(leader.Name())
		}
		e.T.Logf("fault: peer-cut of %s (%s)", leader.Name(), how)
		pause(ctx, cutHold)
		net.Heal(leader.Name())
		return nil
	})
}

// memberKill kills the leader or a follower (SIGKILL) for killHold and
// restarts it on its data.
type memberKill struct{ leader bool }

func (f memberKill) Name() string {
	if f.leader {
		return "leader-kill"
	}
	return "follower-kill"
}

func (f memberKill) Inject(ctx context.Context, e *Env) error {
	leader, followers, err := e.Leader(ctx)
	if err != nil {
		return err
	}
	victim := followers[0]
	if f.leader {
		victim = leader
	}
	return killFor(ctx, killHold, victim)
}

// quorumLoss kills two of the three members, the leader among them, for
// killHold, and restarts them.
type quorumLoss struct{}

func (quorumLoss) Name() string { return "quorum-loss" }

func (quorumLoss) Inject(ctx context.Context, e *Env) error {
	leader, followers, err := e.Leader(ctx)
	if err != nil {
		return err
	}
	return killFor(ctx, killHold, leader, followers[0])
}

// killFor kills ms, waits hold, and starts them again (the runner waits
// for them to be ready).
func killFor(ctx context.Context, hold time.Duration, ms ...*framework.Member) error {
	for _, m := range ms {
		if _, err := m.Kill(); err != nil {
			return err
		}
	}
	pause(ctx, hold)
	for _, m := range ms {
		if err := m.Start(); err != nil {
			return fmt.Errorf("restart %s: %w", m.Name(), err)
		}
	}
	return nil
}

// faultList is every fault of the suite, in the order a short run
// injects them.
func faultList() []Fault {
	cuts := 0
	return []Fault{memberFreeze{}, leaderFreeze{}, peerCut{n: &cuts}, memberKill{leader: false}, memberKill{leader: true}, quorumLoss{},
		&vanishedHost{}, &stopsReading{}}
}

// prepareFaults sets up the faults that need it (preparedFault) and
// returns those that can run here, logging why the others cannot.
func prepareFaults(ctx context.Context, e *Env, faults []Fault) ([]Fault, error) {
	var out []Fault
	for _, f := range faults {
		if p, ok := f.(preparedFault); ok {
			skip, err := p.prepare(ctx, e)
			if err != nil {
				return nil, fmt.Errorf("prepare %s: %w", f.Name(), err)
			}
			if skip != "" {
				e.T.Logf("fault %s skipped: %s", f.Name(), skip)
				continue
			}
		}
		out = append(out, f)
	}
	return out, nil
}
