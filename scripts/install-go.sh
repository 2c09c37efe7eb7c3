#!/usr/bin/env bash
# Makes the Go version that go.mod asks for available and prints the
# directory holding its `go` binary on stdout (progress goes to stderr), so
# callers can run: export PATH="$(scripts/install-go.sh):$PATH"
#
# A `go` already on PATH is used when it is that version or newer.
# Otherwise the official toolchain is fetched from the Go module proxy - the
# same archive `GOTOOLCHAIN=auto` downloads - checked against the SHA-256
# pinned below and unpacked into $GO_INSTALL_DIR if set, else
# /usr/local/go<version> (root) or ~/sdk/go<version>.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
want="$(awk '$1 == "go" { print $2; exit }' "$root/go.mod")"

# SHA-256 of golang.org/toolchain@v0.0.1-go<version>.<os>-<arch>.zip.
declare -A toolchain_sha256=(
	[1.26.8-linux-amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
)

log() { echo "install-go: $*" >&2; }

# version_at_least A B: A >= B in version order.
version_at_least() {
	[[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" == "$2" ]]
}

if command -v go >/dev/null 2>&1; then
	have="$(GOTOOLCHAIN=local go env GOVERSION)"
	have="${have#go}"
	if version_at_least "$have" "$want"; then
		dirname "$(command -v go)"
		exit 0
	fi
	log "go $have on PATH is older than $want"
fi

if [[ -n "${GO_INSTALL_DIR:-}" ]]; then
	dest="$GO_INSTALL_DIR"
elif [[ "$(id -u)" -eq 0 ]]; then
	dest="/usr/local/go$want"
else
	dest="$HOME/sdk/go$want"
fi
if [[ -x "$dest/bin/go" ]]; then
	echo "$dest/bin"
	exit 0
fi

case "$(uname -m)" in
x86_64) arch=amd64 ;;
aarch64 | arm64) arch=arm64 ;;
*) arch="$(uname -m)" ;;
esac
key="$want-linux-$arch"
sum="${toolchain_sha256[$key]:-}"
if [[ -z "$sum" ]]; then
	log "no pinned checksum for Go $key: install Go $want yourself and put it on PATH"
	exit 1
fi

# First entry of GOPROXY, unless that is "direct" or "off".
proxy="${GOPROXY:-https://proxy.golang.org}"
proxy="${proxy%%[,|]*}"
if [[ "$proxy" == direct || "$proxy" == off ]]; then
	proxy=https://proxy.golang.org
fi
module_version="v0.0.1-go$want.linux-$arch"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
log "downloading Go $want ($arch) from $proxy"
curl -fsSL --retry 3 -o "$tmp/toolchain.zip" "$proxy/golang.org/toolchain/@v/$module_version.zip"
echo "$sum  $tmp/toolchain.zip" | sha256sum --check --quiet -
unzip -q "$tmp/toolchain.zip" -d "$tmp/unpacked"
mkdir -p "$(dirname "$dest")"
mv "$tmp/unpacked/golang.org/toolchain@$module_version" "$dest"
chmod -R a+rX "$dest"
log "installed Go $want in $dest"
echo "$dest/bin"
