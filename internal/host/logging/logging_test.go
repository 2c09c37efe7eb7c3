package logging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestJSONLinesHaveEtcdFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.log")
	l, err := New(Config{Logger: "zap", Outputs: []string{path}, Level: "info", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "key", "v", "n", 3)
	l.Debug("hidden at info")
	l.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1:\n%s", len(lines), b)
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &e); err != nil {
		t.Fatal(err)
	}
	ts, _ := e["ts"].(string)
	if e["level"] != "info" || e["msg"] != "hello" || e["key"] != "v" || e["n"] != 3.0 ||
		!regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d{4})$`).MatchString(ts) ||
		!strings.HasPrefix(e["caller"].(string), "logging/logging_test.go:") {
		t.Fatalf("line %s", lines[0])
	}
}

func TestValidateAsEtcd(t *testing.T) {
	for c, want := range map[*Config]string{
		{Logger: "capnslog"}: "--logger=capnslog is removed in v3.5",
		{Logger: "x"}:        `unknown logger option "x"`,
		{Logger: "zap", Outputs: []string{"default", "stderr"}}:                                 `multi logoutput for "default" is not supported yet`,
		{Logger: "zap", Format: "xml"}:                                                          "unknown log format: xml, supported values json, console",
		{Logger: "zap", EnableRotation: true, Outputs: []string{"stderr"}}:                      ErrRotationInvalidOutput.Error(),
		{Logger: "zap", EnableRotation: true, Outputs: []string{"/a"}, RotationConfigJSON: "{"}: "improperly formatted log rotation config",
	} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", *c, err, want)
		}
	}
}

func TestRotatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rot.log")
	l, err := New(Config{Logger: "zap", Outputs: []string{path}, EnableRotation: true, RotationConfigJSON: DefaultRotationConfigJSON})
	if err != nil {
		t.Fatal(err)
	}
	l.Warn("rotated")
	l.Close()
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), `"msg":"rotated"`) {
		t.Fatalf("%s %v", b, err)
	}
}
