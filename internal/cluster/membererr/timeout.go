package membererr

import "time"

// RequestTimeout is how long a member works on one request before it
// gives up on it, as etcd's ServerConfig.ReqTimeout: 5 s for the disk and
// the network, plus two election timeouts for a leader to be elected.
// Without a leader, or without quorum, a request fails within it: a
// proposal raft never took with the deadline's error, a linearizable read
// or a proposal raft took with ErrTimeout, a forwarded lease request with
// ErrNoLeader. A client of the member (the HTTP lock service) bounds its
// calls by it.
func RequestTimeout(electionTimeout time.Duration) time.Duration {
	return 5*time.Second + 2*electionTimeout
}
