package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/metastore-io/metastore/internal/auth"
)

// authFlags are etcd's authentication flags.
type authFlags struct {
	token      string
	tokenTTL   uint
	bcryptCost uint
}

func (f *authFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.token, "auth-token", "simple", "Specify auth token specific options.")
	fs.UintVar(&f.tokenTTL, "auth-token-ttl", 300, "The lifetime in seconds of the auth token.")
	fs.UintVar(&f.bcryptCost, "bcrypt-cost", 10, "Specify bcrypt algorithm cost factor for auth password hashing.")
}

// options turns the flags into the auth store's options; clientCertAuth
// is --client-cert-auth.
func (f *authFlags) options(clientCertAuth bool) auth.Options {
	return auth.Options{
		Token:          f.token,
		TokenTTL:       time.Duration(f.tokenTTL) * time.Second,
		BcryptCost:     int(f.bcryptCost),
		ClientCertAuth: clientCertAuth,
	}
}
