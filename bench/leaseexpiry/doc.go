// Command leaseexpiry is the client side of bench/leaseexpiry.sh: it makes
// a mass of leases expire at the same moment on one etcd-compatible server
// and measures how long the server takes to revoke them all and how much a
// concurrent put load suffers meanwhile.
//
// # The scenario (run)
//
//  1. Grant -leases leases, pipelined over -setup-clients workers, so that
//     all expire in the same second, the expiry instant E = start + -ttl.
//     TTLs are whole seconds and the server starts a lease's clock when it
//     applies the grant, so a burst of grants with one TTL would expire
//     spread over the whole burst (seconds). Each grant instead asks for
//     the seconds left until E, rounded up: a grant sent at E-29.3s gets
//     TTL 30 and expires in [E+0.7s, E+0.7s+latency]; one sent at E-29.9s
//     also gets 30 and expires at about E+0.1s. Every expiry therefore lies
//     in [E, E+1s+grant latency]; the run reports that span ("expiry
//     spread", from each grant's send and receive times), and its start is
//     the expiry instant all figures are measured from.
//  2. Attach -keys-per-lease keys to each lease (puts with the lease, one
//     transaction per lease, up to 128 puts each, so that attaching a
//     million keys does not dominate the run), under <prefix>/leased/,
//     keys zero-padded by lease and key index (lease 42, key 3:
//     <prefix>/leased/0000042/03).
//  3. Wait until -warmup + -baseline before the expiry instant, open a
//     watch on the leased prefix (deletes only) from the revision after
//     the last attach, then start the put load: -put-clients workers, each
//     putting in a closed loop over its own -keys-per-put-client
//     non-leased keys under <prefix>/load/.
//  4. Count delete events until every leased key's delete has arrived, or
//     fail after -bound. Keep the load running -after longer, stop it, and
//     confirm with a count-only range that no leased key is left.
//
// Each completed put is filed under the second it completed in, seconds
// aligned so that one starts at the expiry instant, with its latency in a
// log-linear histogram (1.6% resolution). From those whole seconds come
// three phases: baseline (the -baseline seconds before the expiry
// instant: no lease has expired yet), expiry (from the instant until the
// last leased key is gone) and after. For each: mean put req/s, the
// lowest 5-second mean and the lowest single second, how many seconds fell
// below half the baseline mean (on a shared machine the baseline has such
// seconds too, which is why the count is given for both), p50 and p99.
//
// The run prints a one-column table and, with -json, writes its figures
// for the table subcommand. It exits non-zero if any leased key outlives
// the bound.
//
// # Comparing runs (table)
//
// table reads the JSON of several runs and prints them side by side, with
// -series also the per-second puts, p99 and deleted keys of each.
//
//	leaseexpiry run -name metastore -endpoints 127.0.0.1:2379 -json m.json
//	leaseexpiry run -name etcd -endpoints 127.0.0.1:32379 -json e.json
//	leaseexpiry table m.json e.json
package main
