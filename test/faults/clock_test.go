package faults

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/test/framework"
)

var clockDuration = flag.Duration("clock.duration", 0,
	"step the leader's clock and check lease timing for this long (0: one round unstepped, one +5m, one -5m; later rounds step by -10m..+10m)")

const (
	// clockTTL is every lease's TTL in seconds, above both servers'
	// minimum (1.5 election timeouts).
	clockTTL = 3
	// clockLeases leases are granted in each round.
	clockLeases = 6
	// electionTimeout is both servers' default --election-timeout: a
	// new leader extends every lease by it.
	electionTimeout = time.Second
	// revokeRound is the allowance for one revoke round after expiry:
	// the expiry loop waking, a ReadIndex confirming the leader, the
	// LeaseRevoke's commit and apply, the watch event's delivery (lease
	// doc: the timing bound). Milliseconds on an idle machine (etcd: up
	// to 500 ms more); 5 s leaves room for a loaded 2-core one and still
	// catches a lease that outlives a clock stepped back by minutes.
	revokeRound = 5 * time.Second
	// stepWait bounds how long a member takes to read a new step.
	stepWait = 20 * time.Second
)

// leaseBound is how much later than its TTL a lease may be revoked: the
// lease package's documented bound, E + R.
const leaseBound = electionTimeout + revokeRound

// TestLeaderClockJumps steps the leader's clock (its time of day, through
// the clockfault seam of bin/metastore-faults) forward and backward by
// minutes while leases run, and checks the lease package's timing bound
// on every lease: never revoked before its TTL has passed since the grant
// (or keep-alive) was sent, always revoked within TTL + leaseBound of the
// later of its answer and a new leader's election (the last round kills
// the leader while the leases run). Against etcd, which has no such seam, the same rounds run with
// the clock unstepped: the bound holds for etcd too, so it is etcd's.
func TestLeaderClockJumps(t *testing.T) {
	target, err := framework.TargetFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	stepping := target == framework.TargetMetaStore
	stepDir := t.TempDir()
	cfg := framework.ClusterConfig{Size: 3}
	if stepping {
		requireFaultBinary(t)
		cfg.Binary = faultBinary
		cfg.MemberEnv = func(name, _ string) []string {
			return []string{"METASTORE_CLOCKFAULT=file=" + filepath.Join(stepDir, name+".step")}
		}
	} else {
		t.Logf("%s has no clock seam (the step is MetaStore's fault-injection build): the lease timing is checked with the leader's clock unstepped", target)
	}
	ctx, cancel := context.WithTimeout(t.Context(), *clockDuration+3*time.Minute)
	defer cancel()
	c := framework.NewCluster(t, cfg)
	cli := c.NewClient(t)

	// The last planned round kills the leader once the leases run: the
	// new leader restarts them with the election timeout on top.
	steps := []time.Duration{0, 5 * time.Minute, -5 * time.Minute, 3 * time.Minute}
	if !stepping {
		steps = []time.Duration{0, 0, 0, 0}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0xc10c))
	var totals clockTotals
	leaders := newLeaderFinder(c)
	defer leaders.close()
	end := time.Now().Add(*clockDuration)
	for round := 0; round < len(steps) || time.Now().Before(end); round++ {
		step, killLeader := time.Duration(0), round == len(steps)-1
		if round < len(steps) {
			step = steps[round]
		} else {
			// Long runs: a random step (none against etcd), and a
			// killed leader in one round of four.
			if stepping {
				step = time.Duration(rng.IntN(21)-10) * time.Minute
			}
			killLeader = rng.IntN(4) == 0
		}
		clockRound(ctx, t, c, cli, leaders, clockPlan{round, step, killLeader}, stepDir, &totals)
		if t.Failed() {
			break
		}
	}
	verdict := "within the bound"
	if t.Failed() {
		verdict = "BOUND BROKEN"
	}
	t.Logf("summary: target=%s engine=%s fault=clock duration=%v rounds=%d steps=%d leader-kills=%d leases=%d earliest-revoke=TTL%s latest-revoke=TTL%s bound=TTL+%v verdict=%s",
		target, framework.EngineName(), *clockDuration, totals.rounds, totals.steps, totals.kills, totals.leases,
		signed(totals.earliest), signed(totals.latest), leaseBound, verdict)
}

// clockTotals sum up the rounds for the summary.
type clockTotals struct {
	rounds, steps, kills, leases int
	earliest, latest             time.Duration // revoke time minus TTL, from the request sent / the answer
}

// clockPlan is one round's fault: a step of the leader's clock (0: none),
// and whether the leader is killed once the leases run.
type clockPlan struct {
	round      int
	step       time.Duration
	killLeader bool
}

func (p clockPlan) String() string {
	s := fmt.Sprintf("round %d (step %v", p.round, p.step)
	if p.killLeader {
		s += ", leader killed"
	}
	return s + ")"
}

// leaseWindow is when a lease may be revoked: not before sent+TTL, not
// after answered+TTL+leaseBound.
type leaseWindow struct {
	key            string
	id             clientv3.LeaseID
	sent, answered time.Time
}

// clockRound grants clockLeases leases with a key each, steps the
// leader's clock by the plan's step (unless 0), keeps half of the leases
// alive once, kills the leader if planned, and checks when each key's
// deletion arrives: not before TTL after the request was sent, not later
// than TTL + leaseBound after the later of its answer and the new
// leader's election.
func clockRound(ctx context.Context, t *testing.T, c *framework.Cluster, cli *clientv3.Client, leaders *leaderFinder, plan clockPlan, stepDir string, totals *clockTotals) {
	t.Helper()
	prefix := fmt.Sprintf("/clock/%d/", plan.round)
	deleted := watchDeletes(ctx, t, cli, prefix)
	windows := grantLeases(ctx, t, cli, prefix)
	leader := leaders.find(ctx, t)
	if plan.step != 0 {
		plan.step = stepClock(ctx, t, leader, cli, windows[0].id, filepath.Join(stepDir, leader.Name()+".step"), plan.step)
		totals.steps++
	}
	for i := range windows {
		w := &windows[i]
		ttlResp, err := cli.TimeToLive(ctx, w.id)
		if err != nil {
			t.Fatalf("time-to-live of %x: %v", w.id, err)
		}
		if ttlResp.TTL > clockTTL {
			t.Errorf("%v: lease %x has %d s to live, more than its TTL of %d s", plan, w.id, ttlResp.TTL, clockTTL)
		}
		if i%2 == 1 && ttlResp.TTL > 0 {
			sent := time.Now()
			if _, err := cli.KeepAliveOnce(ctx, w.id); err == nil {
				w.sent, w.answered = sent, time.Now()
			}
		}
	}
	if plan.killLeader {
		if _, err := leader.Kill(); err != nil {
			t.Fatal(err)
		}
		leaders.find(ctx, t)
		elected := time.Now()
		for i := range windows {
			windows[i].answered = later(windows[i].answered, elected)
		}
		totals.kills++
	}
	checkRevokes(ctx, t, plan, windows, deleted, totals)
	if plan.killLeader {
		if err := leader.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	totals.rounds++
	if !t.Failed() {
		t.Logf("%v: %d leases revoked inside [TTL, TTL+%v]", plan, len(windows), leaseBound)
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// grantLeases grants clockLeases leases and puts a key under prefix on
// each, recording when each grant was sent and answered.
func grantLeases(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) []leaseWindow {
	t.Helper()
	windows := make([]leaseWindow, clockLeases)
	for i := range windows {
		w := &windows[i]
		w.key = fmt.Sprintf("%s%d", prefix, i)
		w.sent = time.Now()
		resp, err := cli.Grant(ctx, clockTTL)
		if err != nil {
			t.Fatalf("grant: %v", err)
		}
		w.answered, w.id = time.Now(), resp.ID
		if _, err := cli.Put(ctx, w.key, "v", clientv3.WithLease(resp.ID)); err != nil {
			t.Fatalf("put %s: %v", w.key, err)
		}
	}
	return windows
}

// checkRevokes waits for each lease's key to be deleted and holds the
// time against the lease's window.
func checkRevokes(ctx context.Context, t *testing.T, plan clockPlan, windows []leaseWindow, deleted *deletes, totals *clockTotals) {
	t.Helper()
	ttl := clockTTL * time.Second
	deadline := time.After(ttl + leaseBound + 10*time.Second)
	for _, w := range windows {
		var at time.Time
		select {
		case at = <-deleted.of(w.key):
		case <-deadline:
			t.Fatalf("%v: lease %x (key %s) still not revoked %v after its TTL of %v", plan, w.id, w.key, leaseBound+10*time.Second, ttl)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		early, late := at.Sub(w.sent)-ttl, at.Sub(w.answered)-ttl
		if early < 0 {
			t.Errorf("%v: lease %x revoked %v before its TTL of %v had passed", plan, w.id, -early, ttl)
		}
		if late > leaseBound {
			t.Errorf("%v: lease %x revoked %v after its TTL, beyond the bound of %v", plan, w.id, late, leaseBound)
		}
		if totals.leases == 0 || early < totals.earliest {
			totals.earliest = early
		}
		totals.latest = max(totals.latest, late)
		totals.leases++
	}
}

// deletes records when each key's deletion arrived.
type deletes struct {
	mu   sync.Mutex
	seen map[string]chan time.Time
}

func (d *deletes) of(key string) chan time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.seen[key]
	if !ok {
		ch = make(chan time.Time, 1)
		d.seen[key] = ch
	}
	return ch
}

// watchDeletes watches prefix from now on and records each key's first
// deletion.
func watchDeletes(ctx context.Context, t *testing.T, cli *clientv3.Client, prefix string) *deletes {
	t.Helper()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	d := &deletes{seen: map[string]chan time.Time{}}
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		for wr := range wch {
			at := time.Now()
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					select {
					case d.of(string(ev.Kv.Key)) <- at:
					default:
					}
				}
			}
		}
	}()
	return d
}

// leaderFinder asks the running members who leads, through one client
// per member.
type leaderFinder struct {
	members []*framework.Member
	clients []*clientv3.Client
}

func newLeaderFinder(c *framework.Cluster) *leaderFinder {
	return &leaderFinder{members: c.Members()}
}

func (f *leaderFinder) close() {
	for _, cli := range f.clients {
		cli.Close()
	}
}

// find returns the running member that leads, as its Status says.
func (f *leaderFinder) find(ctx context.Context, t *testing.T) *framework.Member {
	t.Helper()
	for ctx.Err() == nil {
		if m := f.leaderAmong(ctx, t, f.members); m != nil {
			return m
		}
	}
	t.Fatalf("no leader: %v", ctx.Err())
	return nil
}

// leaderAmong asks each running member of members once whether it leads,
// and returns the first that says so, nil if none does.
func (f *leaderFinder) leaderAmong(ctx context.Context, t *testing.T, members []*framework.Member) *framework.Member {
	t.Helper()
	if f.clients == nil {
		for _, m := range f.members {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.Endpoint()}, DialTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			f.clients = append(f.clients, cli)
		}
	}
	for i, m := range f.members {
		if !m.Running() || !slices.Contains(members, m) {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := f.clients[i].Status(sctx, m.Endpoint())
		cancel()
		if err == nil && resp.Leader != 0 && resp.Leader == resp.Header.MemberId {
			return m
		}
	}
	return nil
}

// stepClock writes step into the member's step file and waits until its
// log says it took it; time-to-live calls make the lessor read its clock.
// A step equal to the member's current one (its file outlives a round,
// and a restart) would be no jump: it becomes a minute more. It returns
// the step taken.
func stepClock(ctx context.Context, t *testing.T, m *framework.Member, cli *clientv3.Client, id clientv3.LeaseID, path string, step time.Duration) time.Duration {
	t.Helper()
	if current, err := os.ReadFile(path); err == nil && string(current) == step.String() {
		step += time.Minute
	}
	before, err := os.ReadFile(m.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(step.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	sign := "+"
	if step < 0 {
		sign = ""
	}
	want := []byte("clockfault: the clock is now stepped by " + sign + step.String())
	wctx, cancel := context.WithTimeout(ctx, stepWait)
	defer cancel()
	for {
		log, err := os.ReadFile(m.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(log[len(before):], want) {
			return step
		}
		// Each call is short, so one stuck behind an election does not
		// spend the whole wait.
		cctx, ccancel := context.WithTimeout(wctx, time.Second)
		_, err = cli.TimeToLive(cctx, id)
		ccancel()
		if wctx.Err() != nil {
			t.Fatalf("%s did not take the clock step %v within %v (last time-to-live: %v)", m.Name(), step, stepWait, err)
		}
	}
}

// signed writes d in milliseconds with its sign.
func signed(d time.Duration) string {
	d = d.Round(time.Millisecond)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}
