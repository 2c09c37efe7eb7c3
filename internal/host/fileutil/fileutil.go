package fileutil

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// SyncDir makes file creations, renames and removals in dir durable: on
// Linux a new or renamed file is not guaranteed to survive a power loss
// until its directory has been fsynced.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s for sync: %w", dir, err)
	}
	if err := d.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync dir %s: %w", dir, err), d.Close())
	}
	if err := d.Close(); err != nil {
		return fmt.Errorf("close dir %s: %w", dir, err)
	}
	return nil
}

// HexPairName is "<a 16hex>-<b 16hex><ext>": lowercase and zero-padded, so
// that file names sort in numeric order and one pair has one name.
func HexPairName(a, b uint64, ext string) string {
	return fmt.Sprintf("%016x-%016x%s", a, b, ext)
}

// ParseHexPairName decodes a name written by HexPairName with the same ext;
// ok is false for anything else (including other spellings of the numbers).
func ParseHexPairName(name, ext string) (a, b uint64, ok bool) {
	if len(name) != 16+1+16+len(ext) || !strings.HasSuffix(name, ext) || name[16] != '-' {
		return 0, 0, false
	}
	a, ok1 := parseHex16(name[:16])
	b, ok2 := parseHex16(name[17:33])
	return a, b, ok1 && ok2
}

// parseHex16 decodes exactly 16 lowercase hex digits.
func parseHex16(s string) (uint64, bool) {
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
