// Package auth is etcd 3.6's authentication and role-based access control:
// users, roles and key-range permissions replicated through Raft, the
// tokens that name a request's user, and the permission checks every API
// makes.
//
// # Data
//
// A user has a bcrypt password hash (or none, with the no_password
// option) and a sorted list of role names. A role has permissions, kept
// sorted by key: READ, WRITE or READWRITE on one key (no range end), on
// [key, range_end), or on everything from key on (range end "\x00"). The
// role "root" is implicit: granting it needs no role record, and a user
// with it may do everything, including administration (user/role/auth
// management, Compact, Defragment, Snapshot, Hash, MoveLeader, member
// changes). Authentication can be enabled only when the user "root"
// exists and has the role "root"; while it is enabled neither may be
// deleted nor the role revoked from the user.
//
// The auth revision counts changes: every user, role or permission change
// and AuthDisable moves it (AuthEnable does not; a fresh store is at 1).
// A request carries the revision its token was checked at; a request
// whose credentials predate the current revision fails with
// ErrAuthOldRevision ("etcdserver: revision of auth store is old"), so a
// permission revoked while a request was in flight is never used.
//
// The records live in the MVCC store's auxiliary bucket kvstore.BucketAuth
// (records.go shows the layout) on either storage engine, written in the
// batch of the raft entry that made them. Snapshots copy the whole
// backend, so users and roles travel in raft snapshots and in
// `etcdctl snapshot save` files, and Reload reads them back after a
// restore.
//
// # Raft and determinism
//
// Every change is an InternalRaftRequest (auth_user_add, ...). The
// member that receives a UserAdd or UserChangePassword hashes the
// password (bcrypt, --bcrypt-cost, default 10) and proposes only the
// hash, so neither the raft log nor apply ever sees the password, and
// apply — which must be deterministic — never calls bcrypt. Authenticate
// checks the password on the receiving member, then proposes only the
// user name and, for simple tokens, a random token prefix. The Apply*
// methods read only the request and the replicated state.
//
// # Tokens
//
// --auth-token=simple (the default): "<16 random letters>.<raft index>".
// Every member registers the token when it applies the Authenticate entry,
// so any member accepts it (a member that has not applied the entry yet
// waits for it). It expires --auth-token-ttl (300 s) after its last use on
// a member and is not persisted: a restart forgets it.
//
// --auth-token=jwt,pub-key=FILE,priv-key=FILE,sign-method=RS256,ttl=5m: a
// signed JWT with etcd's claims {username, revision, exp}; every member
// configured with the same key accepts it. Methods are jwt-go's names
// (RS256/384/512, PS256/384/512, ES256/384/512, EdDSA, HS256/384/512);
// with only pub-key a member verifies but cannot issue tokens.
//
// Without a token and with --client-cert-auth, the Common Name of the
// client's verified certificate is the user (never for requests the JSON
// gateway forwards).
//
// # Checks and concurrency
//
// The published state is immutable and swapped atomically by the apply
// goroutine; it includes each user's merged permission ranges (interval
// trees, etcd's rangePermCache), rebuilt with each new revision. A check
// is one atomic load plus tree lookups: no lock on the read path. The
// checks follow etcd's: Put needs WRITE on the key (and READ for prev_kv,
// and WRITE on every key already attached to its lease); DeleteRange
// WRITE on the range (and READ for prev_kv); Range READ; a Txn READ on
// every compare and the check of every operation of both branches and of
// every nested txn, whichever branch runs (CheckTxn).
package auth
