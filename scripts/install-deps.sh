#!/usr/bin/env bash
# Installs the system packages MetaStore needs to build and test on
# Debian/Ubuntu: a C toolchain for cgo (go test -race and the RocksDB
# engine), RocksDB with the compression libraries it links against, and
# what etcd's own suites (scripts/etcd-suites.sh) call.
#
# Idempotent: it asks dpkg first and only runs apt-get (update + install)
# when something is missing. On systems without apt it lists the packages
# and leaves the rest to the user.
set -euo pipefail

packages=(
	gcc g++ pkg-config
	librocksdb-dev libsnappy-dev zlib1g-dev libbz2-dev liblz4-dev libzstd-dev
	# scripts/etcd-suites.sh: unshare (util-linux) and ip (iproute2) for
	# its network namespaces, curl for etcd's curl tests.
	util-linux iproute2 curl
)

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: no dpkg/apt-get here; install the equivalents of: ${packages[*]}" >&2
	exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
	# "ii" = wanted and installed; dpkg -s alone also succeeds for packages
	# that were removed but left their configuration behind.
	if [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null)" != ii* ]]; then
		missing+=("$pkg")
	fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi

sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
		exit 1
	fi
	sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
