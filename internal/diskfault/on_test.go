//go:build faultinject

package diskfault

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	p, err := parse("fsync-error-after=3, fsync-delay=20ms")
	if err != nil || p.errorAfter != 3 || p.delay != 20*time.Millisecond {
		t.Fatalf("parse: %+v, %v", p, err)
	}
	if p, err := parse(""); err != nil || p.errorAfter != -1 || p.delay != 0 {
		t.Fatalf("empty: %+v, %v", p, err)
	}
	for _, bad := range []string{"fsync-error-after=x", "fsync-delay=-1s", "disk-on-fire"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}
