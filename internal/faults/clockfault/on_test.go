//go:build faultinject

package clockfault

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLayout(t *testing.T) {
	if err := checkLayout(); err != nil {
		t.Fatal(err)
	}
}

// A step moves the time of day the clock reports and not the durations
// measured between its readings.
func TestSteppedClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step")
	t.Setenv(EnvVar, "file="+path)
	c := LeaseClock().(*steppedClock)
	before := c.Now()
	if err := os.WriteFile(path, []byte("+5m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var after time.Time
	for deadline := time.Now().Add(5 * time.Second); ; {
		after = c.Now()
		if c.currentStep(after) == 5*time.Minute {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the step file was not read")
		}
		time.Sleep(rereadInterval) // the clock rereads the file at this pace
	}
	if d := after.Sub(before); d < 0 || d > 5*time.Second {
		t.Errorf("the monotonic distance across a +5m step is %v", d)
	}
	if d := after.Round(0).Sub(before.Round(0)); d < 5*time.Minute {
		t.Errorf("the time of day moved %v across a +5m step", d)
	}
	if err := os.WriteFile(path, []byte("-5m"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(rereadInterval)
	back := c.Now()
	if d := back.Round(0).Sub(after.Round(0)); d > -9*time.Minute {
		t.Errorf("the time of day moved %v from +5m to -5m", d)
	}
	if back.Sub(after) < 0 {
		t.Error("a backward step moved the monotonic reading back")
	}
}
