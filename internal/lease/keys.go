package lease

// Keys lists the keys attached to lease id in no particular order, nil
// when the lease does not exist. The auth checks use it: revoking a lease,
// attaching a key to it or renewing it needs write access to every key it
// holds, and listing it (time-to-live with keys) read access.
func (l *Lessor) Keys(id int64) [][]byte {
	l.mu.RLock()
	defer l.mu.RUnlock()
	ls := l.leases[id]
	if ls == nil {
		return nil
	}
	keys := make([][]byte, 0, len(ls.keys))
	for k := range ls.keys {
		keys = append(keys, []byte(k))
	}
	return keys
}
