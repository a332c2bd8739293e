#!/usr/bin/env bash
# Installs the given Debian packages with apt-get (as root, or through sudo
# otherwise). Shared by the install scripts, which pass only what is missing.
set -euo pipefail
[ $# -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "$@"
