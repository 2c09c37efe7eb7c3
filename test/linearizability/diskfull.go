package linearizability

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// The diskfull fault puts every member's data dir on a tmpfs of its own
// from the start (mounting one needs root; without it the fault is
// skipped and says so), and fills the rest of one member's tmpfs with a
// filler file for the hold time: the member's next write that needs a new
// page fails with ENOSPC. A tmpfs holds its pages in RAM, so its size is
// a bound, not an allocation: only the data and the filler cost memory,
// and one filler exists at a time.

const (
	// tmpfsSize bounds each member's data dir: room for etcd's two
	// preallocated 64 MiB WAL segments, a 10-minute run's bbolt file or
	// RocksDB tables, and MetaStore's five newest snapshot files.
	tmpfsSize = "384m"
	// fillerName is the filler file in the data dir's root, beside member/.
	fillerName = "nemesis-filler"
	// fillChunk is the write size while filling; the last bytes go in
	// pages.
	fillChunk = 1 << 20
	fillPage  = 4096
)

// tmpfsDisks mounts and fills the members' file systems.
type tmpfsDisks struct {
	t *testing.T
	// skipped says why there is no tmpfs ("" when mounted).
	skipped string
	mounts  int
}

func newTmpfsDisks(t *testing.T) *tmpfsDisks {
	d := &tmpfsDisks{t: t}
	if os.Geteuid() != 0 {
		d.skipped = "mounting a tmpfs needs root"
		t.Logf("diskfull: %s; the fault will be skipped", d.skipped)
	}
	return d
}

// mount is the ClusterConfig.PrepareDataDir hook: a tmpfs at dir,
// unmounted when the test ends. A first mount that fails (no permission
// in a container) turns the fault off; a later one fails the member.
func (d *tmpfsDisks) mount(name, dir string) error {
	if d.skipped != "" {
		return nil
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+tmpfsSize+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("mount a tmpfs at %s: %w: %s", dir, err, bytes.TrimSpace(out))
		if d.mounts > 0 {
			return err
		}
		d.skipped = err.Error()
		d.t.Logf("diskfull: %s; the fault will be skipped", err)
		return nil
	}
	d.mounts++
	// Registered after the cluster's cleanup, so it runs before it:
	// lazily, the members still running keep their files until killed,
	// and the directory is empty again for the test's TempDir removal.
	d.t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			d.t.Errorf("unmount the tmpfs of %s at %s: %v: %s", name, dir, err, out)
		}
	})
	return nil
}

// filler is a file taking all free space of a member's tmpfs.
type filler struct {
	f    *os.File
	size int64
}

// fill creates the filler in dataDir and writes until the file system is
// full.
func (d *tmpfsDisks) fill(dataDir string) (*filler, error) {
	f, err := os.OpenFile(filepath.Join(dataDir, fillerName), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create the filler: %w", err)
	}
	fl := &filler{f: f}
	if err := fl.topUp(); err != nil {
		return nil, errors.Join(err, fl.remove())
	}
	return fl, nil
}

// topUp writes zeros (tmpfs stores them like any byte) until the file
// system is full: in megabytes, then pages.
func (fl *filler) topUp() error {
	chunk := make([]byte, fillChunk)
	for _, n := range []int{fillChunk, fillPage} {
		for {
			w, err := fl.f.Write(chunk[:n])
			fl.size += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return fmt.Errorf("fill %s: %w", fl.f.Name(), err)
			}
		}
	}
	return nil
}

// remove deletes the filler, giving its space back.
func (fl *filler) remove() error {
	return errors.Join(fl.f.Close(), os.Remove(fl.f.Name()))
}
