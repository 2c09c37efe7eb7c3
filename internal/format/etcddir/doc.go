// Package etcddir turns a data dir of etcd's (3.5 or 3.6, or one made by
// `etcdutl snapshot restore`) into a data dir of MetaStore's, in place,
// so that an operator who swaps the binary keeps the member's keys,
// revisions, leases, users and cluster identity.
//
// An etcd data dir is
//
//	<data-dir>/member/snap/db      etcd's database (package etcddb)
//	<data-dir>/member/snap/*.snap  Raft snapshots (not needed: the db is newer)
//	<data-dir>/member/wal/*.wal    etcd's WAL (read by ReadWAL)
//
// Prepare converts one in four steps, each safe against a crash:
//
//  1. build MetaStore's member dir under member.converting: the engine
//     loaded from etcd's db, the raft log from the WAL entries after the
//     db's consistent index (each rewritten by TranslateEntry into
//     MetaStore's proposal encoding), the hard state and the member
//     identity;
//  2. write the conversion-complete marker into it;
//  3. rename etcd's member dir to member.etcd, where it stays for a way
//     back, and the converted one to member;
//  4. remove member.converting.
//
// A start that finds member.converting without the marker discards it
// and converts again; with the marker, it finishes the renames. Nothing
// of etcd's is changed or removed, only moved aside.
package etcddir
