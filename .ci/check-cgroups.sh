#!/usr/bin/env bash
# Every cgroup a test makes is removed: after a run of the suite no tree's
# cgroup (agentproc-<uuid>) may be left in any hierarchy. A fresh CI machine
# has none before, and nothing but these tests makes them.
set -euo pipefail
uuid='[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
left=$(find /sys/fs/cgroup -mindepth 1 -maxdepth 8 -type d -name 'agentproc-*' 2>/dev/null |
	grep -E "/agentproc-$uuid\$" || true)
if [ -n "$left" ]; then
	echo "check-cgroups: $(printf '%s\n' "$left" | wc -l) cgroups left by the tests${1:+ ($1)}:" >&2
	# What each still holds, for the diagnosis: its members, their state
	# and command line.
	while IFS= read -r d; do
		echo "$d" >&2
		while read -r pid; do
			[ -n "$pid" ] || continue
			printf '  member %s: %s: %s\n' "$pid" \
				"$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null || echo gone)" \
				"$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-200)" >&2
		done <"$d/cgroup.procs" 2>/dev/null || true
	done <<<"$left"
	exit 1
fi
echo "check-cgroups: no cgroup left${1:+ ($1)}"
