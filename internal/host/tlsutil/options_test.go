package tlsutil

import (
	"crypto/tls"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint16
		err  string
	}{
		{"", 0, ""},
		{"TLS1.2", tls.VersionTLS12, ""},
		{"TLS1.3", tls.VersionTLS13, ""},
		{"TLS1.1", 0, `unexpected TLS version "TLS1.1" (must be one of: TLS1.2, TLS1.3)`},
	} {
		got, err := ParseVersion(tt.in)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("ParseVersion(%q) error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestValidateVersions(t *testing.T) {
	for _, tt := range []struct {
		min, max string
		suites   []string
		err      string
	}{
		{"TLS1.2", "", nil, ""},
		{"TLS1.2", "TLS1.3", []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, ""},
		{"TLS1.3", "TLS1.2", nil, "min version (TLS1.3) is greater than max version (TLS1.2)"},
		{"TLS1.3", "", []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "cipher suites cannot be configured when only TLS1.3 is enabled"},
		{"SSL3", "", nil, `unexpected TLS version "SSL3" (must be one of: TLS1.2, TLS1.3)`},
	} {
		err := ValidateVersions(tt.min, tt.max, tt.suites)
		if (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("ValidateVersions(%q, %q, %v) = %v, want %q", tt.min, tt.max, tt.suites, err, tt.err)
		}
	}
}

func TestParseCipherSuites(t *testing.T) {
	got, err := ParseCipherSuites([]string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_RSA_WITH_RC4_128_SHA"})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_RSA_WITH_RC4_128_SHA}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ParseCipherSuites = %v, want %v", got, want)
		}
	}
	if _, err := ParseCipherSuites([]string{"NOPE"}); err == nil || err.Error() != `unexpected TLS cipher suite "NOPE"` {
		t.Fatalf("unknown suite: %v", err)
	}
	if got, err := ParseCipherSuites(nil); got != nil || err != nil {
		t.Fatalf("no suites: %v, %v", got, err)
	}
}
