// Package embed starts a MetaStore member inside a Go program, as etcd's
// go.etcd.io/etcd/server/v3/embed starts an etcd: Kubernetes and many
// other projects test against an embedded etcd this way, and can test
// against MetaStore with the same few lines.
//
//	cfg := embed.NewConfig()
//	cfg.Dir = t.TempDir()
//	cfg.ListenClientUrls = ... // etcd's field names
//	m, err := embed.StartMember(cfg)
//	if err != nil { ... }
//	defer m.Close()
//	select {
//	case <-m.ReadyNotify():
//	case err := <-m.Err(): ...
//	}
//	cli, err := clientv3.New(clientv3.Config{Endpoints: m.ClientURLs()})
//
// Config carries etcd's embed field names and defaults for what MetaStore
// has (name, data dir, URLs, initial cluster, snapshot count, Raft
// timing, request limits) plus its storage engine. A port 0 in a listen
// URL binds a free port; the member then advertises the port it bound
// (for the peer URL too, when the initial cluster is left to default),
// so tests running side by side never collide. ClientURLs reports the
// URLs to dial.
//
// Lifecycle: StartMember returns once the member's Raft log is open and
// its peer listeners serve; ReadyNotify is closed once it has joined the
// cluster and serves clients. Err delivers the error that stopped the
// member on its own (it was removed from the cluster, a disk failed)
// and is closed when the member has stopped. Close stops it gracefully
// (client RPCs drain, watch streams end) and returns once everything it
// started has stopped; call it once, from any goroutine.
//
// The member serves plain http; TLS is configured through the metastore
// command's flags, not (yet) here.
package embed
