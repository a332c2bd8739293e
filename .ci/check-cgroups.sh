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
	printf '%s\n' "$left" >&2
	exit 1
fi
echo "check-cgroups: no cgroup left${1:+ ($1)}"
