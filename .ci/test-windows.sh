#!/usr/bin/env bash
# Runs the tests of every package, of both modules (the library's and
# cmd/agentproc's), as Windows binaries under Wine.
#
# Installs nothing: .ci/install-windows-deps.sh brings Wine and MinGW-w64.
# Everything it makes lives under build/ (git-ignored):
#   build/bcryptprimitives.dll  the shim Wine 8.0 lacks (internal/winshim)
#   build/wineprefix            a private Wine prefix, made on first use
#   build/windows-tests/*.exe   the cross-compiled test binaries, one per
#                               package with tests
# Extra arguments are passed to each test binary, e.g. -test.run=TestWindows.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
mkdir -p "$build"

export WINEDEBUG=-all
export WINEPREFIX="$build/wineprefix"
# No desktop integration or mono/gecko prompts in a fresh prefix.
export WINEDLLOVERRIDES="mscoree,mshtml,winemenubuilder.exe=d"

# Debian's wine wrapper runs /usr/lib/wine/wine64 when wine32 is absent.
wine="${WINE:-wine}"
if ! command -v "$wine" >/dev/null 2>&1; then
	echo "test-windows: $wine not found; run .ci/install-windows-deps.sh" >&2
	exit 1
fi

# Stop this prefix's wineserver on the way out so that nothing of ours
# outlives the script.
trap 'wineserver -k >/dev/null 2>&1 || true' EXIT

echo "test-windows: building bcryptprimitives.dll shim"
x86_64-w64-mingw32-gcc -O2 -Wall -shared -nostdlib -e DllMain \
	-o "$build/bcryptprimitives.dll" \
	"$root/internal/winshim/bcryptprimitives.c" \
	"$root/internal/winshim/bcryptprimitives.def" \
	-lkernel32

sys32="$WINEPREFIX/drive_c/windows/system32"
if [ ! -f "$WINEPREFIX/system.reg" ]; then
	echo "test-windows: initialising Wine prefix $WINEPREFIX"
	start=$(date +%s)
	wineboot -i >/dev/null 2>&1
	echo "test-windows: prefix ready in $(( $(date +%s) - start ))s"
fi
cp "$build/bcryptprimitives.dll" "$sys32/bcryptprimitives.dll"

echo "test-windows: cross-compiling tests"
bin="$build/windows-tests"
rm -rf "$bin"
mkdir -p "$bin"
# Each package's directory, for those with tests when built for Windows,
# and its binary's name: the path from the root with / as _.
dirs=()
names=()
for mod in "$root" "$root/cmd/agentproc"; do
	while IFS= read -r dir; do
		[ -n "$dir" ] || continue
		rel="${dir#"$root"}"
		name="$(echo "${rel#/}" | tr / _)"
		dirs+=("$dir")
		names+=("${name:-agentproc}")
	done < <(cd "$mod" && GOOS=windows go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./...)
done
for i in "${!dirs[@]}"; do
	(cd "${dirs[$i]}" && GOOS=windows GOARCH=amd64 CGO_ENABLED=0 \
		go test -c -o "$bin/${names[$i]}.test.exe" .)
done

echo "test-windows: running ${#dirs[@]} test binaries under $("$wine" --version 2>/dev/null || echo wine)"
# Each binary runs from its package directory, as go test would run it;
# every one runs, and the script fails if any failed.
failed=()
for i in "${!dirs[@]}"; do
	echo "== test-windows: ${names[$i]}"
	if ! (cd "${dirs[$i]}" && "$wine" "$bin/${names[$i]}.test.exe" -test.v -test.timeout=10m "$@") 2>&1 | tee "$bin/${names[$i]}.log"; then
		failed+=("${names[$i]}")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	# A CI log is often read from its tail: repeat what each failed
	# package said about its failures there.
	for name in "${failed[@]}"; do
		echo "== test-windows: what $name said about its failure" >&2
		grep -n -B3 -A12 -E -e '--- FAIL|^panic:|^FAIL|exit status' "$bin/$name.log" | head -80 >&2 || tail -40 "$bin/$name.log" >&2
	done
	echo "test-windows: FAIL: ${failed[*]}" >&2
	exit 1
fi
echo "test-windows: all ${#dirs[@]} packages passed"
