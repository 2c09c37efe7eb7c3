// Command election shows pkg/concurrency's Election: two candidates
// campaign, an observer follows the leader's value, the leader proclaims a
// new value and resigns, and the second candidate takes over.
package main

import (
	"context"
	"fmt"

	"github.com/metastore-io/metastore/examples/internal/connect"
	"github.com/metastore-io/metastore/pkg/concurrency"
)

func main() {
	ctx, cli, _, done := connect.Setup()
	defer done()
	const name = "/examples/election"

	newElection := func() *concurrency.Election {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		connect.Must(err, "session")
		return concurrency.NewElection(s, name)
	}
	observer, first, second := newElection(), newElection(), newElection()

	// The observer prints every leader and value until the second
	// candidate's takes over.
	observeCtx, stopObserving := context.WithCancel(ctx)
	defer stopObserving()
	observed := observer.Observe(observeCtx)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for resp := range observed {
			fmt.Printf("observer: leader %s says %q\n", resp.Kvs[0].Key, resp.Kvs[0].Value)
			if string(resp.Kvs[0].Value) == "second:v1" {
				return
			}
		}
	}()

	connect.Must(first.Campaign(ctx, "first:v1"), "campaign")
	fmt.Println("first leads")
	elected := make(chan error, 1)
	go func() { elected <- second.Campaign(ctx, "second:v1") }()

	connect.Must(first.Proclaim(ctx, "first:v2"), "proclaim")
	connect.Must(first.Resign(ctx), "resign")
	fmt.Println("first resigned")
	connect.Must(<-elected, "second campaign")
	leader, err := second.Leader(ctx)
	connect.Must(err, "leader")
	fmt.Printf("second leads with %q\n", leader.Kvs[0].Value)
	<-printed
	connect.Must(second.Resign(ctx), "resign")
}
