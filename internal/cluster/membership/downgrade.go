package membership

import (
	"errors"
	"fmt"

	"github.com/coreos/go-semver/semver"
)

// Errors of Maintenance.Downgrade. Their texts are etcd 3.6's
// (etcdserver/errors and etcdserver/version), and the client layer maps
// each to the gRPC status etcd returns for it.
var (
	ErrWrongDowngradeVersionFormat   = errors.New("etcdserver: wrong downgrade target version format")
	ErrClusterVersionUnavailable     = errors.New("etcdserver: cluster version not found during downgrade")
	ErrInvalidDowngradeTargetVersion = errors.New("etcdserver: invalid downgrade target version")
	ErrDowngradeInProcess            = errors.New("etcdserver: cluster has a downgrade job in progress")
	ErrNoInflightDowngrade           = errors.New("etcdserver: no inflight downgrade job")
)

// Downgrade is the cluster's downgrade job, as etcd's DowngradeInfo:
// enabled by `etcdctl downgrade enable` with the target cluster version
// ("3.5.0"), cleared by `downgrade cancel`. It is replicated state, set
// by DowngradeInfoSet entries and persisted with the member list.
type Downgrade struct {
	Enabled bool
	// TargetVersion is major.minor.0; empty when not Enabled.
	TargetVersion string
}

// downgradeKey is the downgrade job's key inside Bucket: its value is
// the target version, and the key is absent while no job is enabled.
var downgradeKey = []byte{downgradeKeyPrefix}

// IsClusterRecord reports whether key (without the bucket byte) is one
// of the cluster-wide records of Bucket, the cluster version or the
// downgrade job, rather than a member's.
func IsClusterRecord(key []byte) bool {
	return len(key) == 1 && (key[0] == versionKeyPrefix || key[0] == downgradeKeyPrefix)
}

// IsDowngradeRecord reports whether key (without the bucket byte) is the
// downgrade job's record; its value is the target version.
func IsDowngradeRecord(key []byte) bool { return len(key) == 1 && key[0] == downgradeKeyPrefix }

// DowngradeRecord is the backend record, bucket byte included, of an
// enabled downgrade job to target: for converters that write whole
// backends (internal/format/etcddb); a running member uses SetDowngrade.
func DowngradeRecord(target string) (key, value []byte) {
	return append([]byte{Bucket}, downgradeKey...), []byte(target)
}

// Downgrade is the downgrade job as last applied.
func (c *Cluster) Downgrade() Downgrade {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.downgrade
}

// SetDowngrade enables a downgrade job to target, or with enabled false
// clears it (apply side, etcd's DowngradeInfoSet: a cancel forgets the
// target).
func (c *Cluster) SetDowngrade(w AuxWriter, enabled bool, target string) {
	d := Downgrade{}
	if enabled {
		d = Downgrade{Enabled: true, TargetVersion: target}
	}
	c.mu.Lock()
	c.downgrade = d
	c.mu.Unlock()
	if d.Enabled {
		w.PutAux(Bucket, downgradeKey, []byte(d.TargetVersion))
	} else {
		w.DeleteAux(Bucket, downgradeKey)
	}
}

// ParseDowngradeTarget reads the version a client asks to downgrade to
// as etcd does: a semantic version, or major.minor, of which only
// major.minor count ("3.5", "3.5.2" and "3.5.0-rc.1" all mean 3.5.0).
func ParseDowngradeTarget(v string) (semver.Version, error) {
	ver, err := semver.NewVersion(v)
	if err != nil {
		if ver, err = semver.NewVersion(v + ".0"); err != nil {
			return semver.Version{}, ErrWrongDowngradeVersionFormat
		}
	}
	return semver.Version{Major: ver.Major, Minor: ver.Minor}, nil
}

// ValidateDowngrade checks that a cluster at clusterVersion may start a
// downgrade to target, with etcd's rules and in etcd's order: the
// target must be the previous minor version of the cluster version, and
// no downgrade job may be enabled already.
func ValidateDowngrade(clusterVersion string, target semver.Version, current Downgrade) error {
	cv, err := semver.NewVersion(clusterVersion)
	if err != nil {
		return ErrClusterVersionUnavailable
	}
	if !target.Equal(previousMinor(*cv)) {
		return ErrInvalidDowngradeTargetVersion
	}
	if current.Enabled {
		return ErrDowngradeInProcess
	}
	return nil
}

// NextClusterVersion is the cluster version the leader should record,
// as etcd's version monitor decides it, given the recorded one, the
// lowest server version among the members and the downgrade job; ok is
// false when it should stay. With a job enabled, the cluster version
// moves to its target once both the recorded version and every member
// allow it (a member never runs below the cluster version); without
// one, a cluster version below the members' (a cancelled downgrade, or
// every member upgraded) moves up to theirs. An error means an enabled
// target that can no longer be reached.
func NextClusterVersion(clusterVersion, minServerVersion string, d Downgrade) (next string, ok bool, err error) {
	cv, err := semver.NewVersion(clusterVersion)
	if err != nil {
		return "", false, nil // none recorded yet: the new leader records one
	}
	sv, err := semver.NewVersion(minServerVersion)
	if err != nil {
		return "", false, fmt.Errorf("membership: server version %q: %w", minServerVersion, err)
	}
	minor := semver.Version{Major: sv.Major, Minor: sv.Minor}
	if d.Enabled {
		target, err := semver.NewVersion(d.TargetVersion)
		if err != nil {
			return "", false, fmt.Errorf("membership: downgrade target %q: %w", d.TargetVersion, err)
		}
		switch {
		case target.Equal(*cv):
			return "", false, nil
		case !target.Equal(previousMinor(*cv)), !target.Equal(previousMinor(minor)):
			return "", false, errors.New("invalid downgrade target")
		}
		return target.String(), true, nil
	}
	if cv.Major == minor.Major && cv.LessThan(minor) {
		return minor.String(), true, nil
	}
	return "", false, nil
}

// MajorMinor is a version as etcd logs and reports the cluster version
// ("3.6" for "3.6.0"); a version it cannot read is returned unchanged.
func MajorMinor(v string) string {
	ver, err := semver.NewVersion(v)
	if err != nil {
		return v
	}
	return fmt.Sprintf("%d.%d", ver.Major, ver.Minor)
}

// PredatesStorageVersion reports whether a cluster version ("3.5.0") is
// below 3.6, the first etcd whose schema records a storage version: a
// cluster downgraded to 3.5 has etcd 3.5's schema, without one. ""
// (none recorded) is not.
func PredatesStorageVersion(clusterVersion string) bool {
	v, err := semver.NewVersion(clusterVersion)
	return err == nil && v.LessThan(semver.Version{Major: 3, Minor: 6})
}

// previousMinor is the only version etcd lets a cluster at v downgrade
// to.
func previousMinor(v semver.Version) semver.Version {
	return semver.Version{Major: v.Major, Minor: v.Minor - 1}
}
