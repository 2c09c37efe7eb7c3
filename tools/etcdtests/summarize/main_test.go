package main

import (
	"os"
	"strings"
	"testing"
)

const sampleRun = `{"Action":"run","Test":"TestKV"}
{"Action":"run","Test":"TestKV/NoTLS"}
{"Action":"pass","Test":"TestKV/NoTLS"}
{"Action":"run","Test":"TestKV/PeerTLS"}
{"Action":"fail","Test":"TestKV/PeerTLS"}
{"Action":"fail","Test":"TestKV"}
{"Action":"run","Test":"TestMixed"}
{"Action":"run","Test":"TestMixed/QuorumLastVersion"}
{"Action":"fail","Test":"TestMixed/QuorumLastVersion"}
{"Action":"run","Test":"TestFixed"}
{"Action":"pass","Test":"TestFixed"}
{"Action":"run","Test":"TestSkipped"}
{"Action":"skip","Test":"TestSkipped"}
not a JSON line the binary printed
{"Action":"run","Test":"TestHang"}
{"Action":"output","Test":"TestHang","Output":"..."}
`

func TestReportHoldsFailuresAgainstTheList(t *testing.T) {
	res, err := readRun(strings.NewReader(sampleRun))
	if err != nil {
		t.Fatal(err)
	}
	list := applicable([]known{
		{"common", "metastore", "TestMixed/*LastVersion", "no rafthttp"},
		{"common", "*", "TestFixed", "was broken"},
		{"common", "etcd", "TestKV/PeerTLS", "another target's"},
		{"e2e-ctl", "*", "TestKV/PeerTLS", "another suite's"},
	}, "common", "metastore")
	var out strings.Builder
	if report(&out, "common", "metastore", res, list) {
		t.Error("a run with an unlisted failure and an unfinished test was accepted")
	}
	got := out.String()
	for _, want := range []string{
		"common on metastore: 6 leaves, 2 pass, 2 fail (1 known), 1 skip, 1 unfinished",
		"known failure  TestMixed/QuorumLastVersion: no rafthttp",
		"listed, passed TestFixed",
		"FAIL           TestKV/PeerTLS",
		"UNFINISHED     TestHang",
		"skipped        TestSkipped (unlisted)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}

	// With the failure listed and no hang, the run is accepted.
	res, _ = readRun(strings.NewReader(strings.SplitAfter(sampleRun, "not a JSON")[0]))
	list = append(list, known{"common", "metastore", "TestKV/PeerTLS", "listed"})
	if !report(&out, "common", "metastore", res, list) {
		t.Errorf("a run whose failures are all listed was refused:\n%s", out.String())
	}
}

func TestReadKnownRefusesBadLines(t *testing.T) {
	for _, line := range []string{"common\tmetastore\tTestX", "common\tmetastore\t[\treason"} {
		path := t.TempDir() + "/known"
		if err := writeFile(path, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := readKnown(path); err == nil {
			t.Errorf("line %q accepted", line)
		}
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
