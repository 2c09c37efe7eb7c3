package etcddb

import (
	"errors"

	bolt "go.etcd.io/bbolt"
)

type boltTx = bolt.Tx

// update runs fn in a write transaction on the database file at path.
func update(path string, fn func(tx *bolt.Tx) error) error {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	return errors.Join(db.Update(fn), db.Close())
}
