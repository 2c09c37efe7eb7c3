// Package raftkit is the test kit for code that runs on internal/raftnode:
// the raftnode package's own tests and the peer transport's, which start
// real raft members and need a state machine to drive them.
//
// StateMachine is an ordered list of applied payloads. It checks the
// raftnode.StateMachine contract as it goes (entries in index order, each
// once, one Apply at a time, a conf change alone in its batch, a restored
// image that matches its metadata) and records a violation for Check to
// report, rather than failing from a raft goroutine. Tests wait on it with
// WaitUntil, which wakes on every change instead of sleeping.
//
// The kit imports nothing of raftnode (raftnode.Image is declared in
// internal/format/raftsnap), so raftnode's in-package tests can use it
// without an import cycle. Only tests import it.
package raftkit
