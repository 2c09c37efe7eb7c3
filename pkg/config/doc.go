// Package config is a typed configuration centre on MetaStore (or etcd).
//
// A Store[T] keeps values of one Go type under a key prefix, encoded by a
// Codec (JSON by default). Each named value is one key; its etcd version
// (the number of writes since the key was created) is the value's version,
// which CompareAndSet checks, and its mod revision orders changes
// globally. For a Store[FeatureFlags] with prefix "/config/flags/":
//
//	key                        value                         version  mod revision
//	/config/flags/checkout     {"NewFlow":true,"Limit":20}   3        812
//	/config/flags/search       {"NewFlow":false,"Limit":50}  1        640
//
// CompareAndSet(ctx, "checkout", 3, v) writes only if the key is still at
// version 3; version 0 means "only if it does not exist yet".
//
// # Watching without gaps
//
// Store.Watch delivers the current value and then every later write and
// delete of the key, in revision order, each exactly once. Across a lost
// connection the watch resumes from the revision after the last value
// delivered, so no write is skipped; the only exception is a resume point
// the server has already compacted away, where the watch continues from the
// latest value and marks that update Resynced.
//
// # Manager
//
// A Manager[T] holds the current value of one named entry for the
// application to read at any time without a round trip. Every new value
// is checked by a validator; values that fail validation or do not decode
// are rejected and the last good value stays current (LastError says why).
// When the store is unreachable the Manager keeps serving the last good
// value and picks up the writes it missed once the store is back.
package config
