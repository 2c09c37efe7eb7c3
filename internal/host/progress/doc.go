// Package progress reports how far a long operation (a snapshot restore)
// has come: a bar redrawn in place when the output is a terminal, and
// otherwise a log line every LogInterval, so that a job's log shows it is
// moving without being flooded.
//
// A Reporter is driven by one goroutine: Update with the units done and
// the total, Finish once at the end.
package progress
