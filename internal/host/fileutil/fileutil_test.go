package fileutil

import "testing"

func TestHexPairNameRoundTrip(t *testing.T) {
	for _, c := range []struct{ a, b uint64 }{{0, 0}, {1, 0xabc}, {^uint64(0), 42}} {
		name := HexPairName(c.a, c.b, ".wal")
		a, b, ok := ParseHexPairName(name, ".wal")
		if !ok || a != c.a || b != c.b {
			t.Fatalf("%s parsed as %x, %x, %v", name, a, b, ok)
		}
	}
	for _, bad := range []string{
		"", "0000000000000001-0000000000000002.snap", // wrong ext
		"0000000000000001_0000000000000002.wal",
		"000000000000000A-0000000000000002.wal", // upper case
		"000000000000001-00000000000000002.wal",
		"0000000000000001-000000000000000g.wal",
	} {
		if _, _, ok := ParseHexPairName(bad, ".wal"); ok {
			t.Errorf("ParseHexPairName accepted %q", bad)
		}
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(t.TempDir() + "/missing"); err == nil {
		t.Fatal("SyncDir of a missing dir succeeded")
	}
}
