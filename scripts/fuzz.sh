#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a bounded time each
# (`make fuzz`, FUZZTIME=30s by default). A target that finds a crash
# fails the run; its input is kept under the package's testdata/fuzz/ so
# that the plain unit tests replay it from then on.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${FUZZTIME:-30s}
failed=()
count=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	count=$((count + 1))
	echo "fuzz: $pkg $name for $fuzztime" >&2
	if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"; then
		failed+=("$pkg $name")
	fi
done < <(grep -rHoE --include='*_test.go' '^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\)' --exclude-dir=.git . |
	sed -E 's#^\./##; s#:func (Fuzz[A-Za-z0-9_]+).*#:\1#' | sort)
# The request fuzzer: random well-formed and malformed gRPC requests to a
# live member (needs bin/metastore: make build).
count=$((count + 1))
echo "fuzz: ./test/faults TestRequestFuzzer for $fuzztime" >&2
if ! go test -count=1 -run '^TestRequestFuzzer$' ./test/faults/ -args -reqfuzz.duration="$fuzztime"; then
	failed+=("./test/faults TestRequestFuzzer")
fi
echo "fuzz: $count targets, ${#failed[@]} failed" >&2
if [[ ${#failed[@]} -gt 0 ]]; then
	printf 'fuzz: failed: %s\n' "${failed[@]}" >&2
	exit 1
fi
