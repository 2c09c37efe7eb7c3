package main

import (
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// A featureSpec is one of etcd 3.6's server feature gates.
type featureSpec struct {
	name       string
	def        bool
	preRelease string // ALPHA or BETA, as etcd's --help prints it
	// experimentalFlag is the 3.5 boolean flag 3.6 still accepts for it.
	experimentalFlag string
}

// etcdFeatures are etcd 3.6's server feature gates (server/features), in
// the order etcd's --help lists them after AllAlpha and AllBeta.
var etcdFeatures = []featureSpec{
	{"CompactHashCheck", false, "ALPHA", "experimental-compact-hash-check-enabled"},
	{"InitialCorruptCheck", false, "ALPHA", "experimental-initial-corrupt-check"},
	{"LeaseCheckpoint", false, "ALPHA", "experimental-enable-lease-checkpoint"},
	{"LeaseCheckpointPersist", false, "ALPHA", "experimental-enable-lease-checkpoint-persist"},
	{"SetMemberLocalAddr", false, "ALPHA", ""},
	{"StopGRPCServiceOnDefrag", false, "ALPHA", "experimental-stop-grpc-service-on-defrag"},
	{"TxnModeWriteWithSharedBuffer", true, "BETA", "experimental-txn-mode-write-with-shared-buffer"},
}

// featureGates is --feature-gates: what was set explicitly, over etcd's
// defaults. It is a pflag.Value; every Set merges into what is there, as
// etcd's feature gate does.
type featureGates struct {
	set      map[string]bool
	raw      []string // every --feature-gates value, for the experimental-flag conflict check
	expFlags map[string]*bool
}

func (o *options) registerFeatures(fs *pflag.FlagSet) {
	g := &o.features
	g.set = map[string]bool{}
	g.raw = nil
	g.expFlags = map[string]*bool{}
	var help strings.Builder
	help.WriteString("A set of key=value pairs that describe server level feature gates for alpha/experimental features. Options are:")
	help.WriteString("\nAllAlpha=true|false (ALPHA - default=false)\nAllBeta=true|false (BETA - default=false)")
	for _, f := range etcdFeatures {
		fmt.Fprintf(&help, "\n%s=true|false (%s - default=%t)", f.name, f.preRelease, f.def)
		if f.experimentalFlag != "" {
			v := new(bool)
			*v = f.def
			g.expFlags[f.experimentalFlag] = v
			fs.BoolVar(v, f.experimentalFlag, f.def, fmt.Sprintf("Deprecated in v3.6 and will be decommissioned in v3.7. Use '--feature-gates=%s=true' instead.", f.name))
		}
	}
	fs.Var(g, "feature-gates", help.String())
}

func (g *featureGates) Type() string { return "mapStringBool" }

// String lists the explicitly set gates, key=value sorted, as etcd's does.
func (g *featureGates) String() string {
	var pairs []string
	for k, v := range g.set {
		pairs = append(pairs, fmt.Sprintf("%s=%t", k, v))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

// Set parses "Gate=bool,..." with etcd's messages.
func (g *featureGates) Set(value string) error {
	m := map[string]bool{}
	for _, s := range strings.Split(value, ",") {
		if s == "" {
			continue
		}
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok {
			return fmt.Errorf("missing bool value for %s", k)
		}
		v = strings.TrimSpace(v)
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("invalid value of %s=%s, err: %w", k, v, err)
		}
		m[k] = b
	}
	if err := g.setFromMap(m); err != nil {
		return err
	}
	g.raw = append(g.raw, value)
	return nil
}

func (g *featureGates) setFromMap(m map[string]bool) error {
	for k := range m {
		if !knownFeature(k) {
			return fmt.Errorf("unrecognized feature gate: %s", k)
		}
	}
	for k, v := range m {
		g.set[k] = v
	}
	return nil
}

func knownFeature(name string) bool {
	if name == "AllAlpha" || name == "AllBeta" {
		return true
	}
	for _, f := range etcdFeatures {
		if f.name == name {
			return true
		}
	}
	return false
}

// Enabled reports whether a gate is on: set explicitly, else through
// AllAlpha/AllBeta for its stage, else etcd's default.
func (g *featureGates) Enabled(name string) bool {
	if v, ok := g.set[name]; ok {
		return v
	}
	for _, f := range etcdFeatures {
		if f.name != name {
			continue
		}
		if all, ok := g.set["All"+strings.ToUpper(f.preRelease[:1])+strings.ToLower(f.preRelease[1:])]; ok {
			return all
		}
		return f.def
	}
	return false
}

// applyExperimental folds the explicitly set 3.5 boolean flags into the
// gates, refusing one given together with its gate as etcd does.
func (g *featureGates) applyExperimental(changed func(string) bool) error {
	gatesVal := strings.Join(g.raw, ",")
	m := map[string]bool{}
	for _, f := range etcdFeatures {
		if f.experimentalFlag == "" || !changed(f.experimentalFlag) {
			continue
		}
		v := *g.expFlags[f.experimentalFlag]
		if strings.Contains(gatesVal, f.name) {
			return fmt.Errorf("cannot specify both flags: --%s=%v and --feature-gates=%s=%v at the same time, please just use --feature-gates=%s=%v",
				f.experimentalFlag, v, f.name, g.Enabled(f.name), f.name, g.Enabled(f.name))
		}
		m[f.name] = v
	}
	if err := g.setFromMap(m); err != nil {
		return err
	}
	if g.Enabled("LeaseCheckpointPersist") && !g.Enabled("LeaseCheckpoint") {
		return fmt.Errorf("enabling feature gate LeaseCheckpointPersist requires enabling feature gate LeaseCheckpoint")
	}
	return nil
}

// gateNoEffect says, for each gate MetaStore does not switch, why.
var gateNoEffect = map[string]string{
	"LeaseCheckpoint":              "MetaStore always checkpoints lease TTLs through Raft and keeps them (etcd's behaviour with LeaseCheckpoint and LeaseCheckpointPersist on)",
	"LeaseCheckpointPersist":       "MetaStore always checkpoints lease TTLs through Raft and keeps them (etcd's behaviour with LeaseCheckpoint and LeaseCheckpointPersist on)",
	"StopGRPCServiceOnDefrag":      "MetaStore keeps its gRPC and health services up during defragmentation",
	"TxnModeWriteWithSharedBuffer": "it is bbolt's read buffer sharing; MetaStore's transactions read the MVCC index directly",
}

// logNoEffect says once, for each gate set explicitly that changes
// nothing here, why.
func (g *featureGates) logNoEffect(logger *slog.Logger) {
	names := make([]string, 0, len(g.set))
	for k := range g.set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if reason, ok := gateNoEffect[k]; ok {
			logger.Warn("feature gate has no effect in MetaStore", "gate", k, "value", g.set[k], "reason", reason)
		}
	}
}
