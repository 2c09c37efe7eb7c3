package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestTLSFlagValidation checks the TLS flag combinations etcd refuses,
// with etcd's messages.
func TestTLSFlagValidation(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // "" accepts
	}{
		{nil, ""},
		{[]string{"--tls-min-version=TLS1.3"}, ""},
		{[]string{"--tls-min-version=TLS1.1"}, `unexpected TLS version "TLS1.1" (must be one of: TLS1.2, TLS1.3)`},
		{[]string{"--tls-max-version=TLS1.0"}, `unexpected TLS version "TLS1.0" (must be one of: TLS1.2, TLS1.3)`},
		{[]string{"--tls-min-version=TLS1.3", "--tls-max-version=TLS1.2"}, "min version (TLS1.3) is greater than max version (TLS1.2)"},
		{[]string{"--tls-min-version=TLS1.3", "--cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "cipher suites cannot be configured when only TLS1.3 is enabled"},
		{[]string{"--cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"}, ""},
		{[]string{"--cipher-suites=BOGUS"}, `unexpected TLS cipher suite "BOGUS"`},
		{[]string{"--listen-client-urls=https://127.0.0.1:2379"}, "TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:2379 with HTTPS scheme"},
		{[]string{"--listen-client-urls=https://127.0.0.1:2379", "--auto-tls"}, ""},
		{[]string{"--listen-client-urls=https://127.0.0.1:2379", "--cert-file=c", "--key-file=k"}, ""},
		{[]string{"--listen-metrics-urls=https://127.0.0.1:2381"}, "client TLS key/cert (--cert-file, --key-file) must be provided for metrics secure url"},
		{[]string{"--listen-metrics-urls=https://127.0.0.1:2381", "--auto-tls"}, ""},
		{[]string{"--listen-metrics-urls=http://127.0.0.1:2381"}, ""},
		{[]string{"--listen-peer-urls=https://127.0.0.1:2380"}, "cannot listen on TLS for 127.0.0.1:2380: KeyFile and CertFile are not presented"},
		{[]string{"--peer-cert-allowed-cn=a", "--peer-cert-allowed-hostname=b"}, "AllowedCNs and AllowedHostnames are mutually exclusive"},
		{[]string{"--auto-tls", "--self-signed-cert-validity=0"}, "selfSignedCertValidity is invalid,it should be greater than 0"},
	} {
		o := &options{}
		fs := pflag.NewFlagSet("metastore", pflag.ContinueOnError)
		o.register(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("%v: parse: %v", tt.args, err)
		}
		err := o.validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: refused: %v", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}
