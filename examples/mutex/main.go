// Command mutex shows pkg/concurrency's Mutex, etcd's, drop-in: three
// workers, each with its own session, take turns in a critical section in
// the order they queued, and a TryLock fails fast while the lock is held.
package main

import (
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/examples/internal/connect"
	"github.com/metastore-io/metastore/pkg/concurrency"
)

func main() {
	ctx, cli, _, done := connect.Setup()
	defer done()
	const lockName = "/examples/mutex"

	var wg sync.WaitGroup
	for i := range 3 {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		connect.Must(err, "session")
		defer s.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := concurrency.NewMutex(s, lockName)
			connect.Must(m.Lock(ctx), "lock")
			fmt.Printf("worker %d holds %s (key %s)\n", i, lockName, m.Key())
			// Writes guarded by IsOwner only apply while the lock is held.
			_, err := cli.Txn(ctx).If(m.IsOwner()).
				Then(clientv3.OpPut(fmt.Sprintf("/examples/mutex-data/%d", i), "done")).Commit()
			connect.Must(err, "guarded put")
			time.Sleep(200 * time.Millisecond) // the "work"
			connect.Must(m.Unlock(ctx), "unlock")
			fmt.Printf("worker %d released\n", i)
		}()
	}

	s, err := concurrency.NewSession(cli)
	connect.Must(err, "session")
	defer s.Close()
	probe := concurrency.NewMutex(s, lockName)
	switch err := probe.TryLock(ctx); {
	case errors.Is(err, concurrency.ErrLocked):
		fmt.Println("TryLock: locked by another session, not waiting")
	case err == nil:
		fmt.Println("TryLock: got it before any worker did")
		connect.Must(probe.Unlock(ctx), "unlock")
	default:
		connect.Must(err, "trylock")
	}
	wg.Wait()
}
