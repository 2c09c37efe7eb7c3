package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// snapshotStatus is what snapshot status prints, etcdutl's figures; the
// JSON names are etcdutl's.
type snapshotStatus struct {
	Hash      uint32 `json:"hash"`
	Revision  int64  `json:"revision"`
	TotalKey  int64  `json:"totalKey"`
	TotalSize int64  `json:"totalSize"`
	Version   string `json:"version"`
}

// statusPrinter returns the printer of an output format etcdutl knows for
// snapshot status.
func statusPrinter(format string) (func(io.Writer, snapshotStatus) error, error) {
	switch format {
	case "simple":
		return printStatusSimple, nil
	case "table":
		return printStatusTable, nil
	case "json":
		return printStatusJSON, nil
	}
	return nil, fmt.Errorf("unsupported output format %q: want simple, table or json", format)
}

// statusRow is the header and the row etcdutl prints.
func statusRow(st snapshotStatus) (header, row []string) {
	return []string{"hash", "revision", "total keys", "total size", "version"},
		[]string{
			fmt.Sprintf("%x", st.Hash),
			fmt.Sprint(st.Revision),
			fmt.Sprint(st.TotalKey),
			humanBytes(uint64(st.TotalSize)),
			st.Version,
		}
}

func printStatusSimple(w io.Writer, st snapshotStatus) error {
	_, row := statusRow(st)
	_, err := fmt.Fprintln(w, strings.Join(row, ", "))
	return err
}

func printStatusJSON(w io.Writer, st snapshotStatus) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// printStatusTable draws the table as etcdutl's (tablewriter with its
// defaults): upper-case headers centred, cells aligned right.
func printStatusTable(w io.Writer, st snapshotStatus) error {
	header, row := statusRow(st)
	widths := make([]int, len(header))
	for i := range header {
		header[i] = strings.ToUpper(header[i])
		widths[i] = max(len(header[i]), len(row[i]))
	}
	var b strings.Builder
	rule := func() {
		for _, wd := range widths {
			b.WriteString("+" + strings.Repeat("-", wd+2))
		}
		b.WriteString("+\n")
	}
	line := func(cells []string, pad func(string, int) string) {
		for i, c := range cells {
			b.WriteString("| " + pad(c, widths[i]) + " ")
		}
		b.WriteString("|\n")
	}
	rule()
	line(header, func(s string, wd int) string {
		left := (wd - len(s)) / 2
		return strings.Repeat(" ", left) + s + strings.Repeat(" ", wd-len(s)-left)
	})
	rule()
	line(row, func(s string, wd int) string { return strings.Repeat(" ", wd-len(s)) + s })
	rule()
	_, err := io.WriteString(w, b.String())
	return err
}

// humanBytes formats a size in SI units as etcd's tools do (go-humanize's
// Bytes): "20 kB", "2.1 MB".
func humanBytes(n uint64) string {
	if n < 10 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	exp := math.Floor(math.Log(float64(n)) / math.Log(1000))
	val := math.Floor(float64(n)/math.Pow(1000, exp)*10+0.5) / 10
	format := "%.0f %s"
	if val < 10 {
		format = "%.1f %s"
	}
	return fmt.Sprintf(format, val, units[int(exp)])
}
