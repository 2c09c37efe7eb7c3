// Command configwatch shows pkg/config: a typed Store with
// compare-and-set, a Watch that prints every version in order, and a
// Manager that validates values and keeps the last good one.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/metastore-io/metastore/examples/internal/connect"
	"github.com/metastore-io/metastore/pkg/config"
)

// RateLimits is the configuration being managed.
type RateLimits struct {
	RequestsPerSecond int
	Burst             int
}

func validate(r RateLimits) error {
	if r.RequestsPerSecond <= 0 || r.Burst < r.RequestsPerSecond {
		return fmt.Errorf("invalid limits %+v: need 0 < RequestsPerSecond <= Burst", r)
	}
	return nil
}

func main() {
	ctx, cli, logger, done := connect.Setup()
	defer done()
	store := config.NewStore[RateLimits](cli, "/examples/config/", nil)
	connect.Must(store.Delete(ctx, "api"), "reset")

	// The watch prints every version until the final one (300/600).
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	updates := store.Watch(watchCtx, "api")
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		for u := range updates {
			switch {
			case u.Err != nil:
				fmt.Printf("watch: revision %d did not decode: %v\n", u.Revision, u.Err)
			case u.Deleted:
				fmt.Printf("watch: deleted at revision %d\n", u.Revision)
			default:
				fmt.Printf("watch: version %d = %+v\n", u.Version, u.Value.Value)
				if u.Value.Value.RequestsPerSecond == 300 {
					return
				}
			}
		}
	}()

	accepted := make(chan config.Value[RateLimits], 8)
	manager, err := config.NewManager(ctx, config.ManagerConfig[RateLimits]{
		Store:    store,
		Name:     "api",
		Validate: validate,
		Fallback: &RateLimits{RequestsPerSecond: 10, Burst: 10},
		OnChange: func(prev, cur config.Value[RateLimits]) {
			fmt.Printf("manager: %+v -> %+v\n", prev.Value, cur.Value)
			accepted <- cur
		},
		Logger: logger,
	})
	connect.Must(err, "manager")
	defer manager.Close()
	fmt.Printf("manager starts on the fallback %+v\n", manager.Current())

	v1, err := store.CompareAndSet(ctx, "api", 0, RateLimits{RequestsPerSecond: 100, Burst: 200})
	connect.Must(err, "create")
	_, err = store.CompareAndSet(ctx, "api", 0, RateLimits{RequestsPerSecond: 1, Burst: 1})
	fmt.Println("second create refused:", errors.Is(err, config.ErrVersionMismatch))
	_, err = store.CompareAndSet(ctx, "api", v1.Version, RateLimits{RequestsPerSecond: 500, Burst: 100})
	connect.Must(err, "update")
	last, err := store.Set(ctx, "api", RateLimits{RequestsPerSecond: 300, Burst: 600})
	connect.Must(err, "update")

	// The Manager takes 100/200, rejects 500/100 (Burst below the rate)
	// and takes 300/600; wait until it has.
	for caughtUp := false; !caughtUp; {
		select {
		case v := <-accepted:
			caughtUp = v.Revision >= last.Revision
		case <-ctx.Done():
			connect.Must(ctx.Err(), "waiting for the manager")
		}
	}
	fmt.Printf("manager holds %+v\n", manager.Current())
	<-printed
}
