// Package examples holds runnable programs that show MetaStore's Go
// coordination SDK at work. Each one talks to a server on
// 127.0.0.1:2379 (start one with `make run`) or to --endpoints, runs a short
// scenario in one process, prints what happens, and exits:
//
//	go run ./examples/mutex        # pkg/concurrency: etcd's Mutex, drop-in
//	go run ./examples/election     # pkg/concurrency: Election, Observe
//	go run ./examples/fencing      # pkg/concurrency/lock: fencing tokens, Guard
//	go run ./examples/registry     # pkg/discovery: registry + gRPC resolver
//	go run ./examples/configwatch  # pkg/config: typed Store, Watch, Manager
//
// They run unchanged against etcd 3.6, which is the point of the SDK.
package examples
