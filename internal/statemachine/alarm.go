package statemachine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/metastore-io/metastore/internal/cluster/membererr"
	"github.com/metastore-io/metastore/internal/kvstore"
)

// alarmBucket is the store's auxiliary bucket (kvstore.BucketAlarm) holding
// the active alarms: key the member ID (8 bytes, big endian) and the alarm
// type (4 bytes, big endian), value the pb.AlarmMember in protobuf wire
// format. It is written in the batch of the entry that changed it, so the
// set is as durable as the entry, identical on every member, and part of
// every snapshot image. A NOSPACE alarm of member 0x8e9e05c52164694d:
//
//	'A' 8e 9e 05 c5 21 64 69 4d 00 00 00 01 -> AlarmMember{MemberID, NOSPACE}
const alarmBucket = kvstore.BucketAlarm

// Alarms is the replicated set of active alarms (etcd's v3alarm). The
// apply goroutine changes it (AlarmRequest entries, Load); request paths
// read it (Get, Has). Lock order: mu is a leaf lock.
type Alarms struct {
	mu     sync.RWMutex
	active map[alarmKey]*pb.AlarmMember
}

type alarmKey struct {
	member uint64
	alarm  pb.AlarmType
}

// NewAlarms returns an empty set; Load fills it from a store.
func NewAlarms() *Alarms {
	return &Alarms{active: map[alarmKey]*pb.AlarmMember{}}
}

func alarmStoreKey(k alarmKey) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 12), k.member)
	return binary.BigEndian.AppendUint32(b, uint32(k.alarm))
}

// Load replaces the set with what the store holds (open, snapshot restore).
func (a *Alarms) Load(kv *kvstore.Store) error {
	active := map[alarmKey]*pb.AlarmMember{}
	var decodeErr error
	err := kv.AscendAux(alarmBucket, func(k, v []byte) bool {
		m := &pb.AlarmMember{}
		if err := m.Unmarshal(v); err != nil {
			decodeErr = fmt.Errorf("decode alarm %x: %w", k, err)
			return false
		}
		active[alarmKey{m.MemberID, m.Alarm}] = m
		return true
	})
	if err = errors.Join(err, decodeErr); err != nil {
		return fmt.Errorf("load alarms: %w", err)
	}
	a.mu.Lock()
	a.active = active
	a.mu.Unlock()
	return nil
}

// activate raises an alarm (apply goroutine) and returns it, or the one
// already active for the member and type.
func (a *Alarms) activate(kv *kvstore.Store, m *pb.AlarmMember) (*pb.AlarmMember, error) {
	k := alarmKey{m.MemberID, m.Alarm}
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.active[k]; ok {
		return old, nil
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode alarm: %w", err)
	}
	kv.PutAux(alarmBucket, alarmStoreKey(k), data)
	a.active[k] = m
	return m, nil
}

// deactivate clears an alarm (apply goroutine) and returns it; nil if it
// was not active.
func (a *Alarms) deactivate(kv *kvstore.Store, member uint64, alarm pb.AlarmType) *pb.AlarmMember {
	k := alarmKey{member, alarm}
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.active[k]
	if !ok {
		return nil
	}
	kv.DeleteAux(alarmBucket, alarmStoreKey(k))
	delete(a.active, k)
	return m
}

// Get lists the active alarms of one type (NONE: all), ordered by member
// and type (etcd lists them in map order; the order here is the same on
// every member, so an AlarmRequest GET answers alike everywhere).
func (a *Alarms) Get(alarm pb.AlarmType) []*pb.AlarmMember {
	a.mu.RLock()
	var out []*pb.AlarmMember
	for k, m := range a.active {
		if alarm == pb.AlarmType_NONE || k.alarm == alarm {
			out = append(out, m)
		}
	}
	a.mu.RUnlock()
	slices.SortFunc(out, func(x, y *pb.AlarmMember) int {
		return cmp.Or(cmp.Compare(x.MemberID, y.MemberID), cmp.Compare(x.Alarm, y.Alarm))
	})
	return out
}

// Has reports whether any member has an alarm of this type.
func (a *Alarms) Has(alarm pb.AlarmType) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for k := range a.active {
		if k.alarm == alarm {
			return true
		}
	}
	return false
}

// applyAlarm applies an AlarmRequest entry as etcd's applier does: GET
// lists, ACTIVATE raises (NONE is ignored), DEACTIVATE clears; the
// response holds the alarms the request read or changed.
func (sm *StateMachine) applyAlarm(r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	resp := &pb.AlarmResponse{}
	alarms, kv, log := sm.Alarms, sm.KV, sm.Log
	switch r.Action {
	case pb.AlarmRequest_GET:
		resp.Alarms = alarms.Get(r.Alarm)
	case pb.AlarmRequest_ACTIVATE:
		if r.Alarm == pb.AlarmType_NONE {
			break
		}
		m, err := alarms.activate(kv, &pb.AlarmMember{MemberID: r.MemberID, Alarm: r.Alarm})
		if err != nil {
			return nil, err
		}
		log.Warn("alarm raised", "alarm", r.Alarm.String(), "alarm-member-id", fmt.Sprintf("%x", r.MemberID))
		resp.Alarms = append(resp.Alarms, m)
	case pb.AlarmRequest_DEACTIVATE:
		if m := alarms.deactivate(kv, r.MemberID, r.Alarm); m != nil {
			log.Info("alarm cleared", "alarm", r.Alarm.String(), "alarm-member-id", fmt.Sprintf("%x", r.MemberID))
			resp.Alarms = append(resp.Alarms, m)
		}
	}
	sm.AlarmsChanged(alarms.Get(pb.AlarmType_NONE))
	return resp, nil
}

// gate is etcd's capped and corrupt appliers: with a CORRUPT alarm
// active every request that changes the store fails with ErrCorrupt; with
// a NOSPACE alarm active every request that grows it (Put, a Txn with a
// put in a branch, LeaseGrant) fails with ErrNoSpace, while deletes,
// revokes and compactions go on so that space can be reclaimed. Both
// depend only on replicated state, so every member decides alike.
func (a *Alarms) gate(req *pb.InternalRaftRequest) error {
	if a.Has(pb.AlarmType_CORRUPT) {
		if req.Put != nil || req.DeleteRange != nil || req.Txn != nil || req.Compaction != nil ||
			req.LeaseGrant != nil || req.LeaseRevoke != nil {
			return membererr.ErrCorrupt
		}
	}
	if a.Has(pb.AlarmType_NOSPACE) {
		if req.Put != nil || req.LeaseGrant != nil || (req.Txn != nil && QuotaCost(req.Txn) > 0) {
			return membererr.ErrNoSpace
		}
	}
	return nil
}
