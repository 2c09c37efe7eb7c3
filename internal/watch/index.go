package watch

import "math"

// group is the set of watchers that watch exactly the same keys: one key,
// a range [key, end), or every key from key on. Matching an event finds
// groups, never individual watchers, so a thousand clients watching the
// same prefix cost one lookup, and the events a group matched are gathered
// once and shared by all its watchers.
//
// Bounds are strings: they are immutable copies of the request's bytes,
// and Go compares a string with a converted []byte without allocating.
type group struct {
	key     string
	end     string // exclusive upper bound of a range; "" for a single key or fromKey
	fromKey bool   // the range has no upper bound

	watchers []*watcher // every watcher of the group, whatever its state; order is irrelevant
	synced   int32      // how many of watchers are synced (receive events from the fan-out)

	// Scratch of the pass that matches events to groups: mark is the pass
	// that last touched the group, slot the group's position in that
	// pass's list. Only the goroutine running the pass reads them.
	mark uint64
	slot int32
}

func (g *group) isSingleKey() bool { return g.end == "" && !g.fromKey }

// contains reports whether key falls in the group's keys.
func (g *group) contains(key []byte) bool {
	if g.isSingleKey() {
		return string(key) == g.key
	}
	return string(key) >= g.key && (g.fromKey || string(key) < g.end)
}

// rangeNode is a node of the interval treap that holds the range groups.
// Nodes are ordered by (key, end) with a fromKey end above every end, and
// each carries the largest end of its subtree so that a stabbing query can
// skip subtrees that end before the point.
type rangeNode struct {
	group
	prio        uint64
	left, right *rangeNode
	maxEnd      string
	maxFromKey  bool
}

// index finds the groups whose keys contain a given key: a hash map for
// single-key groups and an interval treap for range groups.
type index struct {
	keys   map[string]*group
	ranges *rangeNode
	// rng is the state of a xorshift generator for treap priorities.
	// Priorities only balance the tree; any sequence works, so a fixed
	// seed keeps runs reproducible.
	rng uint64
}

func newIndex() *index {
	return &index{keys: make(map[string]*group), rng: 0x9e3779b97f4a7c15}
}

func (ix *index) nextPrio() uint64 {
	ix.rng ^= ix.rng << 13
	ix.rng ^= ix.rng >> 7
	ix.rng ^= ix.rng << 17
	return ix.rng
}

// join returns the group for the given keys, creating it if needed.
// created reports whether it was created by this call.
func (ix *index) join(key, end string, fromKey bool) (g *group, created bool) {
	if end == "" && !fromKey {
		if g := ix.keys[key]; g != nil {
			return g, false
		}
		g := &group{key: key}
		ix.keys[key] = g
		return g, true
	}
	var n *rangeNode
	ix.ranges, n, created = ix.insert(ix.ranges, key, end, fromKey)
	return &n.group, created
}

// leave removes g from the index. The caller has emptied it.
func (ix *index) leave(g *group) {
	if g.isSingleKey() {
		delete(ix.keys, g.key)
		return
	}
	ix.ranges = remove(ix.ranges, g.key, g.end, g.fromKey)
}

// match appends to dst every group containing key.
func (ix *index) match(key []byte, dst []*group) []*group {
	return ix.matchUpTo(key, dst, math.MaxInt)
}

// matchUpTo is match, but stops once dst holds more than limit groups: a
// caller with a bound on its work finds out it is exceeded having done
// O(log n + limit).
func (ix *index) matchUpTo(key []byte, dst []*group, limit int) []*group {
	if len(ix.keys) > 0 {
		if g := ix.keys[string(key)]; g != nil {
			dst = append(dst, g)
		}
	}
	if ix.ranges != nil {
		dst = stab(ix.ranges, key, dst, limit)
	}
	return dst
}

// compareRange orders ranges by key, then end, a fromKey end last.
func compareRange(akey, aend string, afrom bool, bkey, bend string, bfrom bool) int {
	switch {
	case akey < bkey:
		return -1
	case akey > bkey:
		return 1
	case afrom != bfrom:
		if afrom {
			return 1
		}
		return -1
	case aend < bend:
		return -1
	case aend > bend:
		return 1
	}
	return 0
}

// insert adds the range to the treap rooted at n unless present, and
// returns the new root and the range's node.
func (ix *index) insert(n *rangeNode, key, end string, fromKey bool) (root, found *rangeNode, created bool) {
	if n == nil {
		nn := &rangeNode{group: group{key: key, end: end, fromKey: fromKey}, prio: ix.nextPrio()}
		nn.fix()
		return nn, nn, true
	}
	switch c := compareRange(key, end, fromKey, n.key, n.end, n.fromKey); {
	case c == 0:
		return n, n, false
	case c < 0:
		n.left, found, created = ix.insert(n.left, key, end, fromKey)
		if n.left.prio > n.prio {
			n = rotateRight(n)
		}
	default:
		n.right, found, created = ix.insert(n.right, key, end, fromKey)
		if n.right.prio > n.prio {
			n = rotateLeft(n)
		}
	}
	n.fix()
	return n, found, created
}

// remove deletes the range from the treap rooted at n and returns the new
// root. The range must be present.
func remove(n *rangeNode, key, end string, fromKey bool) *rangeNode {
	if n == nil {
		panic("watch: removing a range group that is not in the index")
	}
	switch c := compareRange(key, end, fromKey, n.key, n.end, n.fromKey); {
	case c < 0:
		n.left = remove(n.left, key, end, fromKey)
	case c > 0:
		n.right = remove(n.right, key, end, fromKey)
	default:
		// Rotate the node down until it has at most one child, then
		// splice it out.
		switch {
		case n.left == nil:
			return n.right
		case n.right == nil:
			return n.left
		case n.left.prio > n.right.prio:
			n = rotateRight(n)
			n.right = remove(n.right, key, end, fromKey)
		default:
			n = rotateLeft(n)
			n.left = remove(n.left, key, end, fromKey)
		}
	}
	n.fix()
	return n
}

func rotateRight(n *rangeNode) *rangeNode {
	l := n.left
	n.left = l.right
	l.right = n
	n.fix()
	l.fix()
	return l
}

func rotateLeft(n *rangeNode) *rangeNode {
	r := n.right
	n.right = r.left
	r.left = n
	n.fix()
	r.fix()
	return r
}

// fix recomputes the node's subtree maximum end from its children.
func (n *rangeNode) fix() {
	n.maxEnd, n.maxFromKey = n.end, n.fromKey
	for _, c := range [2]*rangeNode{n.left, n.right} {
		if c == nil || n.maxFromKey {
			continue
		}
		if c.maxFromKey {
			n.maxFromKey = true
		} else if c.maxEnd > n.maxEnd {
			n.maxEnd = c.maxEnd
		}
	}
}

// stab appends to dst the groups of the subtree at n whose range contains
// key. It skips every subtree whose largest end is at or below key and
// every right subtree whose smallest start is above it, so a query costs
// O(log n + matches). It stops once dst holds more than limit groups.
func stab(n *rangeNode, key []byte, dst []*group, limit int) []*group {
	for n != nil && len(dst) <= limit {
		if !n.maxFromKey && string(key) >= n.maxEnd {
			return dst
		}
		dst = stab(n.left, key, dst, limit)
		if string(key) < n.key {
			// Everything to the right starts even later.
			return dst
		}
		if n.fromKey || string(key) < n.end {
			dst = append(dst, &n.group)
		}
		n = n.right
	}
	return dst
}
