package framework

import "sync"

// login is the user the framework's own clients (readiness probes,
// Member.NewClient) authenticate as, for tests that enable etcd's
// authentication: once auth is on, an unauthenticated Status or Get is
// refused, and a restarted member would never look ready.
type login struct {
	mu       sync.Mutex
	user     string
	password string
}

func (c *login) get() (user, password string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.user, c.password
}

// SetCredentials makes the member's probes and clients authenticate as
// user (clientv3 ignores credentials while auth is disabled).
func (m *Member) SetCredentials(user, password string) {
	m.creds.mu.Lock()
	m.creds.user, m.creds.password = user, password
	m.creds.mu.Unlock()
}

// SetCredentials sets the credentials of every member (Member.SetCredentials).
func (c *Cluster) SetCredentials(user, password string) {
	for _, m := range c.Members() {
		m.SetCredentials(user, password)
	}
}
