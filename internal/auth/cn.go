package auth

import (
	"context"
	"crypto/x509"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

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

// The member's own Lock and Election services are clients of this very
// server over an in-memory connection (pkg/etcdcompat's coordination):
// their requests arrive without the caller's certificate. They pass the
// caller's Common Name on in LoopbackCommonNameKey metadata, which is
// believed only on that connection: its peer address is of network
// LoopbackNetwork (grpc's bufconn), which nothing outside the process can
// dial, so a remote client cannot name itself this way.
const (
	LoopbackCommonNameKey = "metastore-loopback-common-name"
	LoopbackNetwork       = "bufconn"
)

// CallerCommonName is the Common Name of the verified client certificate
// of the call in ctx, or of the caller the in-process loopback speaks
// for; none for calls the JSON gateway forwards (the certificate there is
// the gateway's, not its caller's).
func CallerCommonName(ctx context.Context) (string, bool) {
	cn, viaGateway, ok := callerCommonName(ctx)
	return cn, ok && !viaGateway
}

// callerCommonName is CallerCommonName that also says whether the
// certificate's call came through the JSON gateway.
func callerCommonName(ctx context.Context) (cn string, viaGateway, ok bool) {
	p, ok := peer.FromContext(ctx)
	if !ok || p == nil {
		return "", false, false
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if p.Addr != nil && p.Addr.Network() == LoopbackNetwork {
		if names := md.Get(LoopbackCommonNameKey); len(names) > 0 && names[0] != "" {
			return names[0], false, true
		}
		return "", false, false
	}
	tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", false, false
	}
	cn, ok = CommonName(tlsInfo.State.VerifiedChains)
	return cn, len(md.Get(gatewayMarker)) > 0, ok
}
