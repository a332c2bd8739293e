#!/usr/bin/env bash
# Installs the tools some tests drive (Debian, as root): git for the
# non-interactive environment tests, mkfs.ext4 (e2fsprogs) and fsfreeze
# (util-linux) for the frozen output log directory test, chromium (with a
# font, for a readable screenshot) for the httpapi web page's browser tests,
# node and npm for the TypeScript MCP client test, and node and python3 for
# the event-loop prompts of the input detection tests (Node's readline,
# Python's asyncio) and the python3 programs other tests start
# (http.server, a select loop). Those tests skip
# with a reason when a tool is missing; CI should run them. Safe to run
# again; it installs nothing that is already there.
set -euo pipefail

need=()
command -v git >/dev/null 2>&1 || need+=(git)
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v fsfreeze >/dev/null 2>&1 || need+=(util-linux)
command -v less >/dev/null 2>&1 || need+=(less) # the pager git falls back to
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-dejavu-core)
# Node and npm for TestTypeScriptSDKSession (cmd/agentproc), which installs
# the TypeScript MCP SDK from npm itself, and node for the event-loop input
# detection tests (TestAwaitingInputEventLoop).
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# curl for the NetworkHosts proxy tests and conformance suite (and git, npm
# and go through the proxy: TestSandboxHostsRealClients).
command -v curl >/dev/null 2>&1 || need+=(curl)
# openssl for TestAttackDenialRuleCarriesSecret (a TLS server name sent
# through the proxy: openssl s_client -proxy).
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# Debian's pip for the same test (pip through the proxy; it runs as the
# unprivileged user too, so not a pip under /root).
[ -x /usr/bin/pip3 ] || need+=(python3-pip)
# fish and zsh (bash is there) for the completion scripts of cmd/agentproc
# (TestShellCompletion).
command -v fish >/dev/null 2>&1 || need+=(fish)
command -v zsh >/dev/null 2>&1 || need+=(zsh)
# mkfs.btrfs for the hidden paths' other names on a btrfs subvolume
# (TestAttackHiddenPathBtrfsTopLevel, TestAttackHiddenPathBtrfsSubvolume).
command -v mkfs.btrfs >/dev/null 2>&1 || need+=(btrfs-progs)
# bindfs for a hidden path seen through a FUSE view of the home
# (TestAttackHiddenPathFUSEView, TestAttack16rUnprivileged).
command -v bindfs >/dev/null 2>&1 || need+=(bindfs)
# groff for the manual page agentproc man prints (TestManPage renders it).
command -v groff >/dev/null 2>&1 || need+=(groff-base)
# QEMU and cpio for the cgroup v2 limit tests in a VM (make test-cgroup-vm).
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
command -v cpio >/dev/null 2>&1 || need+=(cpio)
bash "$(dirname "$0")/apt-install.sh" ${need[@]+"${need[@]}"}

# The unprivileged user the sandbox tests run as a second time
# (TestSandboxUnprivileged).
id agentproc-sandbox >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin agentproc-sandbox
