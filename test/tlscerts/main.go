// Command tlscerts writes the test PKI of test/framework (a CA, a member
// certificate for 127.0.0.1/localhost, client certificates, a second CA,
// a CRL) into a directory, for the benchmark scripts' TLS=1 runs:
//
//	go run ./bench/tlscerts DIR
//
// Files: e2e-ca.crt, member.crt/.key (server and peer), client.crt/.key,
// root.crt/.key (CN root), and the others framework.NewPKI writes.
package main

import (
	"fmt"
	"os"

	"github.com/metastore-io/metastore/test/framework"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tlscerts DIR")
		os.Exit(2)
	}
	if err := os.MkdirAll(os.Args[1], 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "tlscerts:", err)
		os.Exit(1)
	}
	if _, err := framework.NewPKI(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "tlscerts:", err)
		os.Exit(1)
	}
}
