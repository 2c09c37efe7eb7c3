package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"
)

// diskFaultPollInterval spaces the reads of a member's log while waiting
// for it to acknowledge a disk-fault plan (the seam rereads its file
// every 50 ms).
const diskFaultPollInterval = 20 * time.Millisecond

// diskFaultFile is where a member's disk-fault plan lives
// (ClusterConfig.DiskFaults); "" without.
func (m *Member) diskFaultFile() string {
	if !m.cfg.DiskFaults {
		return ""
	}
	return m.dataDir + ".diskfault"
}

// SetDiskFault makes spec the member's disk-fault plan (the grammar of
// internal/faults/diskfault: "fsync-delay=2s", "write-error", "" for a healthy
// disk) and, when the member runs, waits until its log acknowledges it
// ("diskfault: now ..."): from then on its syncs and writes follow spec.
// A member that is down, or exits meanwhile, takes spec when it starts.
// It needs ClusterConfig.DiskFaults and a fault build
// (bin/metastore-faults).
func (m *Member) SetDiskFault(ctx context.Context, spec string) error {
	path := m.diskFaultFile()
	if path == "" {
		return fmt.Errorf("member %s: the cluster was not started with DiskFaults", m.name)
	}
	current, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("member %s: read disk-fault plan: %w", m.name, err)
	}
	if string(current) == spec {
		return nil // in force already: nothing will be acknowledged
	}
	offset := int64(0)
	if st, err := os.Stat(m.logPath); err == nil {
		offset = st.Size()
	}
	// Renamed over the plan whole: the member could read a file
	// rewritten in place empty, a healthy disk, for a moment.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(spec), 0o644); err != nil {
		return fmt.Errorf("member %s: write disk-fault plan: %w", m.name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("member %s: write disk-fault plan: %w", m.name, err)
	}
	exited := m.Exited()
	if exited == nil || !m.Running() {
		return nil
	}
	ticker := time.NewTicker(diskFaultPollInterval)
	defer ticker.Stop()
	for {
		ack, err := m.logSince(offset)
		if err != nil {
			return err
		}
		if bytes.Contains(ack, []byte("diskfault: now ")) {
			return nil
		}
		if i := bytes.Index(ack, []byte("diskfault: "+path+":")); i >= 0 {
			line, _, _ := bytes.Cut(ack[i:], []byte("\n"))
			return fmt.Errorf("member %s refused the disk-fault plan %q: %s", m.name, spec, line)
		}
		select {
		case <-ticker.C:
		case <-exited:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("member %s did not acknowledge the disk-fault plan %q: %w", m.name, spec, ctx.Err())
		}
	}
}

// logSince returns the member's log from offset on.
func (m *Member) logSince(offset int64) ([]byte, error) {
	f, err := os.Open(m.logPath)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.name, err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("member %s: %w", m.name, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("member %s: read log: %w", m.name, err)
	}
	return data, nil
}
