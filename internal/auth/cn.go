package auth

import "crypto/x509"

// CommonName is the Common Name of the leaf of the first non-empty
// verified chain: the identity etcd takes from a client certificate. The
// chains are what crypto/tls verified against the trusted CAs; an
// unverified certificate never names a user.
func CommonName(verifiedChains [][]*x509.Certificate) (string, bool) {
	for _, chain := range verifiedChains {
		if len(chain) < 1 || chain[0] == nil {
			continue
		}
		return chain[0].Subject.CommonName, true
	}
	return "", false
}
