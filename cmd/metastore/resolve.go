package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// resolveFlags settles where the configuration comes from, as etcd does:
// a --config-file (or ETCD_CONFIG_FILE) replaces every other flag and
// environment variable; otherwise the command line wins over ETCD_* and
// METASTORE_* variables. It then applies etcd's cross-flag rules and
// validates. It returns the flag set the options were read from.
func resolveFlags(cmdline *pflag.FlagSet, o *options) (*pflag.FlagSet, configFileNotes, error) {
	var notes configFileNotes
	path := o.configFile
	if path == "" {
		path = os.Getenv("METASTORE_CONFIG_FILE")
	}
	if path == "" {
		path = os.Getenv("ETCD_CONFIG_FILE")
	}
	fs := cmdline
	if path != "" {
		*o = options{}
		fs = pflag.NewFlagSet("config-file", pflag.ContinueOnError)
		o.register(fs)
		var err error
		if notes, err = loadConfigFile(fs, path); err != nil {
			return nil, notes, err
		}
		o.configFile = path
	} else if err := applyEnv(fs); err != nil {
		return nil, notes, err
	}
	changed := func(name string) bool { f := fs.Lookup(name); return f != nil && f.Changed }
	if err := checkDeprecated(fs); err != nil {
		return nil, notes, err
	}
	if err := o.features.applyExperimental(changed); err != nil {
		return nil, notes, err
	}
	if err := o.discovery.validate(o.initialCluster != ""); err != nil {
		return nil, notes, err
	}
	if path == "" && changed("listen-client-urls") && !changed("advertise-client-urls") {
		return nil, notes, errors.New("--advertise-client-urls is required when --listen-client-urls is set explicitly")
	}
	if err := o.noEffect.validate(); err != nil {
		return nil, notes, err
	}
	if err := o.validate(); err != nil {
		return nil, notes, err
	}
	return fs, notes, nil
}

// normalizeArgs accepts etcd's single-dash spelling (-name x), which Go's
// flag package allows: an argument "-word" naming a long flag of the
// command it belongs to becomes "--word".
func normalizeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		cmd = root
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && cmd.Flags().Lookup(name) != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// invalidFlagValue matches pflag's message for a value a flag refuses.
var invalidFlagValue = regexp.MustCompile(`^invalid argument (".*") for "(?:-\w, )?--([\w-]+)" flag: (.*)$`)

// etcdFlagError words pflag's parse errors as Go's flag package (and so
// etcd) does.
func etcdFlagError(err error) error {
	msg := err.Error()
	if m := invalidFlagValue.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("invalid value %s for flag -%s: %s", m[1], m[2], m[3])
	}
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		return fmt.Errorf("flag provided but not defined: -%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "unknown shorthand flag: "); ok {
		if i := strings.Index(name, " in "); i >= 0 {
			name = name[:i]
		}
		return fmt.Errorf("flag provided but not defined: -%s", strings.Trim(name, "'"))
	}
	return err
}
