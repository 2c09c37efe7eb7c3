# shellcheck shell=bash
# Loopback port picking shared by the bench scripts (sourced, not run).
# Ports are picked afresh for every server: other benchmarks and test
# suites on the machine take loopback ports too, so fixed ports would
# collide (and a client could measure another script's server).

# port_free PORT: nothing accepts connections on it.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_ports N: prints the first of N consecutive free loopback ports;
# fails if none are found.
free_ports() {
	local n=$1 p i ok
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 10000))
		ok=1
		for ((i = 0; i < n; i++)); do
			port_free "$((p + i))" || { ok=""; break; }
		done
		if [[ -n "$ok" ]]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}
