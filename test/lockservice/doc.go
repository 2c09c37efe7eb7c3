// Package lockservice tests MetaStore's HTTP lock service (/v1/lock/...)
// against real server processes: FIFO order, independence of resources,
// handover on unlock, release when a holder's or waiter's connection is cut
// (the client process killed, the socket closed without a word), 403 and
// 400 answers, a lock held through a leader kill on three members, and
// increasing fencing tokens. The service is MetaStore's own, not etcd's:
// with E2E_TARGET=etcd every test skips and says so.
package lockservice
