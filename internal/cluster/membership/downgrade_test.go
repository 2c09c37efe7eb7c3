package membership

import (
	"errors"
	"testing"
)

func TestParseDowngradeTarget(t *testing.T) {
	for in, want := range map[string]string{"3.5": "3.5.0", "3.5.2": "3.5.0", "3.5.0-rc.1": "3.5.0", "3.4": "3.4.0"} {
		got, err := ParseDowngradeTarget(in)
		if err != nil || got.String() != want {
			t.Errorf("ParseDowngradeTarget(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{"", "3", "abc", "v3.5", "3.5.x"} {
		if _, err := ParseDowngradeTarget(in); !errors.Is(err, ErrWrongDowngradeVersionFormat) {
			t.Errorf("ParseDowngradeTarget(%q) error %v, want %v", in, err, ErrWrongDowngradeVersionFormat)
		}
	}
}

func TestValidateDowngrade(t *testing.T) {
	enabled := Downgrade{Enabled: true, TargetVersion: "3.5.0"}
	for _, c := range []struct {
		cv, target string
		current    Downgrade
		want       error
	}{
		{"3.6.0", "3.5", Downgrade{}, nil},
		{"3.6.0", "3.6", Downgrade{}, ErrInvalidDowngradeTargetVersion},
		{"3.6.0", "3.4", Downgrade{}, ErrInvalidDowngradeTargetVersion},
		{"3.6.0", "3.7", Downgrade{}, ErrInvalidDowngradeTargetVersion},
		{"3.6.0", "3.5", enabled, ErrDowngradeInProcess},
		// Once the cluster version followed the job, 3.5 is no longer
		// the previous minor: etcd checks the target first.
		{"3.5.0", "3.5", enabled, ErrInvalidDowngradeTargetVersion},
		{"3.5.0", "3.4", enabled, ErrDowngradeInProcess},
		{"", "3.5", Downgrade{}, ErrClusterVersionUnavailable},
	} {
		target, err := ParseDowngradeTarget(c.target)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateDowngrade(c.cv, target, c.current); !errors.Is(err, c.want) {
			t.Errorf("ValidateDowngrade(%q, %s, %+v) = %v, want %v", c.cv, c.target, c.current, err, c.want)
		}
	}
}

func TestNextClusterVersion(t *testing.T) {
	enabled := Downgrade{Enabled: true, TargetVersion: "3.5.0"}
	for _, c := range []struct {
		cv, sv  string
		d       Downgrade
		want    string // "" stays
		wantErr bool
	}{
		{"3.6.0", "3.6.16", enabled, "3.5.0", false},
		{"3.5.0", "3.6.16", enabled, "", false},
		{"3.5.0", "3.6.16", Downgrade{}, "3.6.0", false}, // cancelled
		{"3.6.0", "3.6.16", Downgrade{}, "", false},
		{"3.6.0", "3.7.0", enabled, "", true}, // members too new for the target
		{"3.7.0", "3.7.0", enabled, "", true},
		{"", "3.6.16", enabled, "", false}, // none recorded: the new leader's
	} {
		got, ok, err := NextClusterVersion(c.cv, c.sv, c.d)
		if got != c.want || ok != (c.want != "") || (err != nil) != c.wantErr {
			t.Errorf("NextClusterVersion(%q, %q, %+v) = %q, %v, %v; want %q, error %v", c.cv, c.sv, c.d, got, ok, err, c.want, c.wantErr)
		}
	}
}

func TestDowngradePersistsAndReloads(t *testing.T) {
	store := auxMap{}
	c := New(1, 99)
	c.SetVersion(store, "3.6.0")
	c.SetDowngrade(store, true, "3.5.0")
	reloaded := New(1, 99)
	if err := reloaded.Load(store); err != nil {
		t.Fatal(err)
	}
	if got := reloaded.Downgrade(); got != (Downgrade{Enabled: true, TargetVersion: "3.5.0"}) || reloaded.Version() != "3.6.0" {
		t.Fatalf("after reload: downgrade %+v version %q", got, reloaded.Version())
	}
	c.SetDowngrade(store, false, "3.5.0")
	if err := reloaded.Load(store); err != nil {
		t.Fatal(err)
	}
	if got := reloaded.Downgrade(); got != (Downgrade{}) || len(reloaded.Members()) != 0 {
		t.Fatalf("after a cancel and reload: downgrade %+v members %v", got, reloaded.Members())
	}
}
