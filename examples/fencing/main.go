// Command fencing shows why pkg/concurrency/lock hands out fencing tokens:
// a holder that stops renewing (think of a long GC pause) loses its lock to
// the next contender, and its late write, made through the lock's Guard, is
// refused instead of overwriting the new holder's.
package main

import (
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/metastore-io/metastore/examples/internal/connect"
	"github.com/metastore-io/metastore/pkg/concurrency/lock"
)

func main() {
	ctx, cli, logger, done := connect.Setup()
	defer done()
	locker, err := lock.NewLocker(lock.Config{Client: cli, Prefix: "/examples/locks/", Logger: logger})
	connect.Must(err, "locker")
	const resource = "/examples/fenced-resource"

	// The "slow" holder renews by hand and then forgets to: after its
	// 2-second TTL the server lets the lock go.
	slow, err := locker.Lock(ctx, "report", lock.WithTTL(2*time.Second), lock.WithManualRenewal(), lock.WithOwner("slow"))
	connect.Must(err, "slow lock")
	fmt.Printf("slow holder: token %d\n", slow.FencingToken())
	_, err = slow.Guard().Do(ctx, clientv3.OpPut(resource, "written by slow"))
	connect.Must(err, "slow write")

	// A second process (a second Locker here) waits for the lock.
	other, err := lock.NewLocker(lock.Config{Client: cli, Prefix: "/examples/locks/"})
	connect.Must(err, "locker")
	start := time.Now()
	fast, err := other.Lock(ctx, "report", lock.WithOwner("fast"))
	connect.Must(err, "fast lock")
	fmt.Printf("fast holder: token %d after %v\n", fast.FencingToken(), time.Since(start).Round(100*time.Millisecond))
	_, err = fast.Guard().Do(ctx, clientv3.OpPut(resource, "written by fast"))
	connect.Must(err, "fast write")

	select {
	case <-slow.Lost():
		fmt.Println("slow holder was told:", slow.Err())
	default:
	}
	_, err = slow.Guard().Do(ctx, clientv3.OpPut(resource, "late write by slow"))
	fmt.Println("slow holder's late write:", err, "- refused:", errors.Is(err, lock.ErrOwnershipLost))
	fmt.Println("slow holder's unlock:", slow.Unlock(ctx))

	resp, err := cli.Get(ctx, resource)
	connect.Must(err, "get")
	fmt.Printf("resource holds %q\n", resp.Kvs[0].Value)
	connect.Must(fast.Unlock(ctx), "unlock")
}
