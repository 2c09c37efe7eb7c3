package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"google.golang.org/grpc/metadata"
)

// Where a client puts its token: gRPC clients in the "token" metadata,
// the JSON gateway's callers in the Authorization header, which the
// gateway forwards as "authorization" metadata (rpctypes'
// TokenFieldNameGRPC and TokenFieldNameSwagger).
const (
	tokenFieldGRPC    = "token"
	tokenFieldSwagger = "authorization"
	// gatewayMarker is metadata the gateway adds to every request it
	// forwards: its TLS identity is the gateway's, not the caller's.
	gatewayMarker = "grpcgateway-accept"
)

// AuthInfoFromCtx is who a request is from: the user of its token, else,
// with --client-cert-auth, the Common Name of its verified client
// certificate; nil without either (or while auth is off). A token that is
// not valid (unknown, expired, badly signed) is ErrInvalidAuthToken.
func (s *Store) AuthInfoFromCtx(ctx context.Context) (*AuthInfo, error) {
	ai, err := s.authInfoFromToken(ctx)
	if ai != nil || err != nil {
		return ai, err
	}
	if !s.certAuth {
		return nil, nil
	}
	return s.authInfoFromTLS(ctx), nil
}

func (s *Store) authInfoFromToken(ctx context.Context) (*AuthInfo, error) {
	st := s.load()
	if !st.enabled {
		return nil, nil
	}
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil, nil
	}
	ts, ok := md[tokenFieldGRPC]
	if !ok {
		ts, ok = md[tokenFieldSwagger]
	}
	if !ok || len(ts) == 0 {
		return nil, nil
	}
	token := strings.TrimPrefix(ts[0], "Bearer ")
	ai, valid := s.tokens.info(ctx, token, st.rev)
	if !valid {
		s.log.Warn("invalid auth token", "token-fingerprint", redactToken(token))
		return nil, ErrInvalidAuthToken
	}
	return ai, nil
}

// authInfoFromTLS names the user by the Common Name of the caller's
// verified client certificate (CallerCommonName).
func (s *Store) authInfoFromTLS(ctx context.Context) *AuthInfo {
	cn, viaGateway, ok := callerCommonName(ctx)
	if !ok {
		return nil
	}
	if viaGateway {
		s.log.Warn("ignoring common name in gRPC-gateway proxy request", "common-name", cn)
		return nil
	}
	s.log.Debug("found common name", "common-name", cn)
	return &AuthInfo{Username: cn, Revision: s.Revision()}
}

// redactToken is a short fingerprint of a token for logs: the token
// itself is a credential and is never logged.
func redactToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])[:12]
}

// CertIdentity reports whether client certificates name users now:
// --client-cert-auth is set and authentication is on.
func (s *Store) CertIdentity() bool { return s.certAuth && s.IsAuthEnabled() }
