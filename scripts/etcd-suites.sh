#!/usr/bin/env bash
# Runs etcd's own test suites (go.etcd.io/etcd/tests/v3, the version
# pinned in tools/etcdtests, the same as the reference binaries) against
# bin/metastore, or against the reference etcd to see what etcd itself
# passes on this machine.
#
#   scripts/etcd-suites.sh [-short] [-run RE] [-skip RE] [-timeout D] SUITE...
#
# SUITE is one of
#   common     tests/common, built with -tags e2e (every cluster shape,
#              mixed-version ones included: bin/ref/etcd-3.5 is the
#              framework's etcd-last-release)
#   e2e-ctl    tests/e2e, the TestCtlV3* tests
#   e2e-misc   tests/e2e: curl and the JSON gateway, health, metrics, cmux,
#              authority, watch, force-new-cluster, member replace, config
#              and logging (the files listed in misc_files below)
#
# -short runs the subset `make test` runs (short_run below), without the
# mixed-version shapes. -run replaces a suite's selection.
#
# Environment:
#   ETCD_SUITES_TARGET  metastore (default) or etcd: what the framework
#                       starts as "etcd"
#   ETCD_SUITES_MIXED   0 leaves etcd-last-release out, which drops the
#                       mixed-version cluster shapes (default 1)
#   ETCD_SUITES_OUT     output directory (default out/etcd-suites)
#
# The binaries are used as they are: the framework's bin dir holds links to
# bin/metastore (or bin/ref/etcd) as etcd, bin/ref/etcdctl, bin/ref/etcdutl
# and bin/ref/etcd-3.5 as etcd-last-release. The framework uses fixed ports,
# so each suite runs in a network namespace of its own (unshare --net).
# Every leaf test's outcome is held against test/etcdsuites/known-failures.txt
# (tools/etcdtests/summarize): a failure not listed there, or a test cut
# off unfinished, fails the run. Listed entries whose reason starts with
# "hangs:" are skipped instead of run.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
GO=${GO:-go}
target=${ETCD_SUITES_TARGET:-metastore}
mixed=${ETCD_SUITES_MIXED:-1}
out=${ETCD_SUITES_OUT:-$root/out/etcd-suites}
known=$root/test/etcdsuites/known-failures.txt

run_re= skip_re= timeout=60m short=0
suites=()
while [[ $# -gt 0 ]]; do
	case $1 in
	-short) short=1 mixed=0; shift ;;
	-run) run_re=$2; shift 2 ;;
	-skip) skip_re=$2; shift 2 ;;
	-timeout) timeout=$2; shift 2 ;;
	common | e2e-ctl | e2e-misc) suites+=("$1"); shift ;;
	*) echo "etcd-suites: unknown argument $1" >&2; exit 2 ;;
	esac
done
[[ ${#suites[@]} -gt 0 ]] || { echo "usage: $0 [-run RE] [-skip RE] [-timeout D] common|e2e-ctl|e2e-misc..." >&2; exit 2; }

case $target in
metastore) server=$root/bin/metastore ;;
etcd) server=$root/bin/ref/etcd ;;
*) echo "etcd-suites: ETCD_SUITES_TARGET is metastore or etcd, not $target" >&2; exit 2 ;;
esac
for b in "$server" bin/ref/etcdctl bin/ref/etcdutl bin/ref/etcd-3.5; do
	[[ -x $b ]] || { echo "etcd-suites: $b is missing (make build tools)" >&2; exit 2; }
done

# Build the suites from the module cache, at tools/etcdtests' version.
version=$(cd tools/etcdtests && $GO list -m -f '{{.Version}}' go.etcd.io/etcd/tests/v3)
mkdir -p "$out/bin"
(cd tools/etcdtests && $GO test -c -tags e2e -o "$out/bin/common.test" go.etcd.io/etcd/tests/v3/common)
(cd tools/etcdtests && $GO test -c -o "$out/bin/e2e.test" go.etcd.io/etcd/tests/v3/e2e)
(cd tools/etcdtests && $GO build -o "$out/bin/summarize" ./summarize)

# The suites read their fixtures (certificates) from ../fixtures and write
# beside them, and the module cache is read-only: run from a copy, laid
# out as in etcd's repository: the tests module in tests/, below the
# root, whose etcd.conf.yml.sample TestEtcdExampleConfig starts the
# server with (../../etcd.conf.yml.sample from tests/e2e). The tests
# module does not hold that file; the root module go.etcd.io/etcd/v3 does,
# and tools/ has it (for the benchmark) at v3.6.8, as the module proxy
# does not serve the root module at the tests' version: the sample has
# not changed on the 3.6 branch since v3.6.0.
src=$(cd tools/etcdtests && $GO list -m -f '{{.Dir}}' go.etcd.io/etcd/tests/v3)
(cd tools && $GO mod download go.etcd.io/etcd/v3)
sample=$(cd tools && $GO list -m -f '{{.Dir}}' go.etcd.io/etcd/v3)/etcd.conf.yml.sample
[[ -f $sample ]] || { echo "etcd-suites: $sample is missing" >&2; exit 2; }
root_copy=$out/src-$version
work=$root_copy/tests
if [[ ! -d $work ]]; then
	rm -rf "$root_copy.tmp"
	mkdir -p "$root_copy.tmp"
	cp -r "$src" "$root_copy.tmp/tests"
	chmod -R u+w "$root_copy.tmp"
	rm -rf "$root_copy"
	mv "$root_copy.tmp" "$root_copy"
fi
install -m 0644 "$sample" "$root_copy/etcd.conf.yml.sample"
# The sample names no data dir: the server makes default.etcd (etcd) or
# default.metastore in tests/e2e. Start each run without the last one's.
rm -rf "$work/e2e/default.etcd" "$work/e2e/default.metastore"

bindir=$out/bin-$target
rm -rf "$bindir"
mkdir -p "$bindir"
ln -s "$server" "$bindir/etcd"
ln -s "$root/bin/ref/etcdctl" "$bindir/etcdctl"
ln -s "$root/bin/ref/etcdutl" "$bindir/etcdutl"
if [[ $mixed == 1 ]]; then
	ln -s "$root/bin/ref/etcd-3.5" "$bindir/etcd-last-release"
fi

# A network namespace of its own, with loopback up: as root directly,
# otherwise inside a user namespace.
netns=(unshare --net)
[[ $(id -u) -eq 0 ]] || netns=(unshare --net --map-root-user)

# Inside it: loopback, and a second address on it with the default route,
# so that a node address other than 127.0.0.1 exists: tests/e2e's
# getLocalIP learns it by dialling 8.8.8.8 over UDP (which sends nothing),
# and TestEtcdPeerLocalAddr binds peers to it.
netns_setup='ip link set lo up && ip addr add 10.213.0.1/32 dev lo && ip route add default dev lo src 10.213.0.1'
# Where no network namespace can be made (a container without the
# privilege), the suites run in the machine's: their fixed ports must then
# be free, and TestEtcdPeerLocalAddr uses the machine's own address.
if ! "${netns[@]}" true 2>/dev/null; then
	echo "etcd-suites: cannot unshare a network namespace here; running in the machine's" >&2
	netns=()
	netns_setup=true
fi

# misc_files are the tests/e2e files of the e2e-misc suite; misc_tests
# add single tests from other files.
# (globs, expanded in the copy of tests/e2e).
misc_files='v3_curl_*_test.go gateway_test.go http_health_check_test.go metrics_test.go
	cmux_test.go watch_test.go force_new_cluster_test.go etcd_config_test.go
	logging_test.go zap_logging_test.go'
misc_tests=(TestAuthority TestMemberReplace TestMemberReplaceWithLearner)

# short_run is the -short selection of each suite: a few minutes of the
# KV, txn, lease, watch, member, auth and status API in every cluster
# shape, etcdctl, and the start-up and serving behaviour tools rely on.
declare -A short_run=(
	[common]='^(TestKVPut|TestKVGet|TestKVDelete|TestTxnSucc|TestLeaseGrantTimeToLive|TestWatch|TestMemberList|TestAuthEnable|TestStatus|TestCompact)$'
	[e2e-ctl]='^(TestCtlV3Version|TestCtlV3PutTimeout|TestCtlV3GetFormat|TestCtlV3GetRev|TestCtlV3DelTimeout|TestCtlV3Lock|TestCtlV3Elect|TestCtlV3MemberList|TestCtlV3Snapshot|TestCtlV3WatchNoTLS)$'
	[e2e-misc]='^(TestCurlV3KVBasicOperation|TestGateway|TestHTTPHealthHandler|TestConnectionMultiplexing|TestSnapshotCatchupEntriesFlag|TestBootstrapDefragFlag|TestEtcdExampleConfig|TestEtcdListenMetricsURLsWithMissingClientTLSInfo)$'
)

# hang_skips: the known failures that hang rather than fail, as a -skip
# pattern for one suite.
hang_skips() {
	awk -F'\t' -v s="$1" -v t="$target" '$1 == s && ($2 == t || $2 == "*") && $4 ~ /^hangs:/ { print $3 }' "$known" |
		sed 's/[.[\]()+?^$|{}]/\\&/g; s/\*/.*/g' | paste -sd'|' -
}

rc=0
for suite in "${suites[@]}"; do
	sel=$run_re
	[[ $short == 1 && -z $sel ]] && sel=${short_run[$suite]}
	case $suite in
	common) bin=common.test dir=common suite_run=$sel ;;
	e2e-ctl) bin=e2e.test dir=e2e suite_run=${sel:-'^TestCtlV3'} ;;
	e2e-misc)
		bin=e2e.test dir=e2e
		# shellcheck disable=SC2086 # misc_files are globs
		names=$(cd "$work/e2e" && grep -ho '^func Test[A-Za-z0-9_]*' $misc_files | sed 's/^func //')
		suite_run=${sel:-"^($(printf '%s\n' $names "${misc_tests[@]}" | paste -sd'|' -))\$"}
		;;
	esac
	skip=$(hang_skips "$suite")
	[[ -n $skip_re ]] && skip=${skip:+$skip|}$skip_re
	log=$out/$target-$suite.json
	echo "etcd-suites: $suite on $target (etcd tests $version), log $log" >&2
	start=$SECONDS
	args=(-test.v=test2json -test.timeout "$timeout" -test.run "$suite_run" -bin-dir "$bindir")
	[[ -n $skip ]] && args+=(-test.skip "$skip")
	# test2json turns the binary's -test.v=test2json output into events.
	"${netns[@]}" bash -c "$netns_setup"' && cd "$1" && shift && exec "$@"' _ "$work/$dir" \
		$GO tool test2json -t -p "$suite" "$out/bin/$bin" "${args[@]}" >"$log" 2>&1 || true
	echo "etcd-suites: $suite took $((SECONDS - start))s" >&2
	"$out/bin/summarize" -suite "$suite" -target "$target" -known "$known" "$log" || rc=1
done
exit $rc
