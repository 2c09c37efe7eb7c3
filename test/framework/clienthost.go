package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ClientHost is a client machine a test can make vanish: a network
// namespace of its own, joined to this host by a veth pair with an address
// at each end. Processes started with Command run inside it and reach a
// server listening on HostIP; Vanish then takes the namespace's side of the
// link down, so from the server's side the client's host is gone without a
// FIN or an RST, as when a machine loses power or its cable: the server's
// packets are dropped and nothing ever answers them.
//
// Creating namespaces needs root (CAP_NET_ADMIN) and the ip command;
// NewClientHost skips the test without them.
type ClientHost struct {
	ns      string // namespace name
	hostIf  string // this host's end of the veth pair
	nsIf    string // the namespace's end
	hostIP  string
	guestIP string
}

// NewClientHost creates a client host, removed when t ends. Each one gets
// its own /30 in 10.213.0.0/16 and names made of the process id, so tests
// of several packages running at once do not collide (a clash is reported
// as a failure to create, not silently shared).
func NewClientHost(t testing.TB) *ClientHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a client host is a network namespace: creating one needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("a client host needs the ip command (iproute2)")
	}
	tag := fmt.Sprintf("%d%c", os.Getpid()%100000, 'a'+rand.IntN(26))
	subnet := rand.IntN(1 << 14) // a /30 among the 16,384 of the /16
	h := &ClientHost{
		ns:      "msclient" + tag,
		hostIf:  "msh" + tag,
		nsIf:    "msg" + tag,
		hostIP:  fmt.Sprintf("10.213.%d.%d", subnet>>6, (subnet&63)*4+1),
		guestIP: fmt.Sprintf("10.213.%d.%d", subnet>>6, (subnet&63)*4+2),
	}
	t.Cleanup(h.remove)
	steps := [][]string{
		{"netns", "add", h.ns},
		{"link", "add", h.hostIf, "type", "veth", "peer", "name", h.nsIf},
		{"link", "set", h.nsIf, "netns", h.ns},
		{"addr", "add", h.hostIP + "/30", "dev", h.hostIf},
		{"link", "set", h.hostIf, "up"},
		{"-n", h.ns, "addr", "add", h.guestIP + "/30", "dev", h.nsIf},
		{"-n", h.ns, "link", "set", h.nsIf, "up"},
		{"-n", h.ns, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if err := runIP(args...); err != nil {
			t.Fatalf("create client host: %v", err)
		}
	}
	return h
}

func runIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// remove deletes the namespace; its end of the veth pair goes with it,
// and with that the host's end.
func (h *ClientHost) remove() {
	_ = runIP("netns", "del", h.ns)
	_ = runIP("link", "del", h.hostIf) // gone already unless the move failed
}

// HostIP is this host's address on the link: a server must listen on it
// to be reachable from the client host.
func (h *ClientHost) HostIP() string { return h.hostIP }

// IP is the client host's own address.
func (h *ClientHost) IP() string { return h.guestIP }

// Command prepares name with args to run inside the client host (through
// ip netns exec, which execs it: the process's pid is the command's).
func (h *ClientHost) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.ns, name}, args...)...)
}

// Vanish takes the client host off the link without a word: its interface
// goes down, so whatever this host sends it is dropped, and its processes,
// still running, can neither answer nor close their connections.
func (h *ClientHost) Vanish() error {
	if err := runIP("-n", h.ns, "link", "set", h.nsIf, "down"); err != nil {
		return fmt.Errorf("client host %s vanish: %w", h.ns, err)
	}
	return nil
}

// Reconnect puts a vanished client host back on the link, for the next
// test that makes it vanish; connections that outlived the cut may then
// hear the server's resets.
func (h *ClientHost) Reconnect() error {
	if err := runIP("-n", h.ns, "link", "set", h.nsIf, "up"); err != nil {
		return fmt.Errorf("client host %s reconnect: %w", h.ns, err)
	}
	return nil
}

// ServeFrom restarts m with a second plain client URL on the link's host
// address (a port of its own), kept across its later restarts, and
// returns that URL: the client host reaches m there.
func (h *ClientHost) ServeFrom(ctx context.Context, t testing.TB, m *Member) (string, error) {
	t.Helper()
	url := fmt.Sprintf("http://%s:%d", h.hostIP, ReservePorts(t, 1)[0])
	args := m.Args()
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--listen-client-urls="); ok {
			args[i] = "--listen-client-urls=" + v + "," + url
		}
	}
	if _, err := m.Stop(10 * time.Second); err != nil {
		return "", fmt.Errorf("stop %s to listen on %s: %w", m.Name(), url, err)
	}
	m.SetArgs(args)
	if err := m.Restart(ctx); err != nil {
		return "", fmt.Errorf("restart %s listening on %s: %w", m.Name(), url, err)
	}
	return url, nil
}
