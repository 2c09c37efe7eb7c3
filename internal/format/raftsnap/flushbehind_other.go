//go:build !linux

package raftsnap

import "os"

// flushBehind writes a new file. Only Linux starts its write-back early
// (flushbehind_linux.go); elsewhere the final fsync writes it all.
type flushBehind struct{ f *os.File }

func (w *flushBehind) Write(p []byte) (int, error) { return w.f.Write(p) }
