#!/usr/bin/env bash
# Installs what .ci/test-windows.sh needs: Wine to run the Windows test
# binary, and MinGW-w64 to build the bcryptprimitives.dll shim that Wine 8.0
# lacks. Safe to run again; it installs nothing that is already there.
set -euo pipefail

need=()
# wine64 holds the 64-bit loader (/usr/lib/wine/wine64); wine puts the wine
# and wineboot commands on PATH (wine picks wine64 when wine32 is absent).
if [ ! -x /usr/lib/wine/wine64 ] || ! command -v wine >/dev/null 2>&1; then
	need+=(wine wine64)
fi
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64-win32)
bash "$(dirname "$0")/apt-install.sh" ${need[@]+"${need[@]}"}
