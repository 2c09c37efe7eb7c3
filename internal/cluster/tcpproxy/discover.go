package tcpproxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Resolver looks up SRV records; *net.Resolver is one.
type Resolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// Discovered are the client endpoints SRV records name: URLs (https for
// _etcd-client-ssl records, http for _etcd-client ones) and the records,
// index for index.
type Discovered struct {
	URLs []string
	SRVs []*net.SRV
}

// Discover looks up the client SRV records of domain, etcd's
// _etcd-client-ssl[-name]._tcp and _etcd-client[-name]._tcp, secure
// ones first. It fails only when neither lookup succeeds.
func Discover(ctx context.Context, r Resolver, domain, name string) (Discovered, error) {
	var d Discovered
	var errs []error
	for _, scheme := range []string{"https", "http"} {
		service := "etcd-client"
		if scheme == "https" {
			service += "-ssl"
		}
		if name != "" {
			service += "-" + name
		}
		_, srvs, err := r.LookupSRV(ctx, service, "tcp", domain)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, s := range srvs {
			d.URLs = append(d.URLs, scheme+"://"+net.JoinHostPort(s.Target, strconv.Itoa(int(s.Port))))
			d.SRVs = append(d.SRVs, s)
		}
	}
	if len(errs) == 2 {
		return Discovered{}, fmt.Errorf("dns lookup errors: %w and %w", errs[0], errs[1])
	}
	return d, nil
}

// KeepSecure keeps the discovered endpoints that are https and accept a
// TCP connection within timeout, as etcd's gateway validates them
// without --insecure-discovery. caFile, when set, must hold a readable
// CA bundle or nothing is kept. The TLS handshake itself is left to the
// clients: their connections pass through the proxy unchanged. The error
// lists every endpoint refused and why; what is kept is returned with it.
func (d Discovered) KeepSecure(ctx context.Context, caFile string, dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration) (Discovered, error) {
	if caFile != "" {
		if err := checkCAFile(caFile); err != nil {
			return Discovered{}, err
		}
	}
	var kept Discovered
	var refusals []string
	for i, u := range d.URLs {
		host, ok := strings.CutPrefix(u, "https://")
		if !ok {
			refusals = append(refusals, fmt.Sprintf("%q is insecure", u))
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, timeout)
		c, err := dial(dctx, "tcp", host)
		cancel()
		if err != nil {
			refusals = append(refusals, fmt.Sprintf("%q failed to dial (%v)", u, err))
			continue
		}
		c.Close()
		kept.URLs = append(kept.URLs, u)
		kept.SRVs = append(kept.SRVs, d.SRVs[i])
	}
	if len(refusals) > 0 {
		return kept, errors.New(strings.Join(refusals, ","))
	}
	return kept, nil
}

// checkCAFile reads a PEM CA bundle as a TLS client would.
func checkCAFile(path string) error {
	pem, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read trusted CA file: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return fmt.Errorf("trusted CA file %s: no certificate found", path)
	}
	return nil
}
