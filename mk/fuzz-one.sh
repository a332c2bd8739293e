#!/usr/bin/env bash
# fuzz-one.sh GO PKG TARGET FUZZTIME: one fuzz target, retried once when the
# only failure is Go 1.26's coordinator race at the -fuzztime deadline
# (golang/go#75804, fixed in Go 1.27): "context deadline exceeded" with no
# failing input written. A real finding always writes its input under
# testdata/fuzz and is never retried.
set -uo pipefail
go=$1 pkg=$2 target=$3 fuzztime=$4
for attempt in 1 2; do
	log=$(mktemp)
	"$go" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"
	st=${PIPESTATUS[0]}
	if [ "$st" -eq 0 ]; then rm -f "$log"; exit 0; fi
	if [ "$attempt" -eq 1 ] && grep -q 'context deadline exceeded' "$log" &&
		! grep -q 'Failing input written' "$log"; then
		echo "fuzz: $target hit the -fuzztime deadline race (golang/go#75804) with no failing input; running it again"
		rm -f "$log"
		continue
	fi
	rm -f "$log"
	exit "$st"
done
