#!/usr/bin/env bash
# Runs the cgroup limit tests (fork bomb under pids.max, memory hog under
# memory.max, CPU share under cpu.max, the default parent, 200 racing
# starts, a dead host's cgroups removed by its guard) and the
# sandbox's cgroup escape (TestAttackCgroupEscapeByClone3, which needs
# cgroup2's nsdelegate: the guest mounts it so, as systemd does) inside a
# small QEMU VM whose cgroup v2 has every controller, and checks that
# they leave no agentproc-* cgroup in the guest: on
# this project's machines those controllers are bound to cgroup v1
# hierarchies, where the same tests run through the v1 backend, so this is
# where the v2 backend's run. Part of CI (.ci/run): with the kernel cached
# it takes about 90 s under emulation (TCG), a few minutes more with the
# downloads. The tests' time bounds are stretched by the slowdown they
# measure (a Start+Wait of true against a native 2 ms), so emulation speed
# does not decide them; the CPU share is measured in the guest's own time.
# TestCgroupUsage, whose fixed busy loop takes over its 10 s deadline under
# emulation on a loaded host, runs on the host instead (it needs no
# controller).
#
# Needs qemu-system-x86, cpio and apt (Debian); downloads a Debian kernel and
# busybox-static with apt-get download into build/cgroupvm (git-ignored).
# Extra arguments replace the test regex, e.g. 'TestLimitsCPUShare'.
# After the tests it runs BenchmarkLimits in the guest and prints its
# medians and ratio: the v2 figure of the Limits table in docs/benchmarks.md.
# AGENTPROC_VM_KVM=1 uses KVM instead of emulation where it boots
# (AGENTPROC_VM_CPU picks the CPU model, default host; on this project's
# machines nested KVM does not boot the guest, so CI emulates).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
vm="$root/build/cgroupvm"
mkdir -p "$vm"
cd "$vm"

for tool in qemu-system-x86_64 cpio; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "test-cgroup-vm: $tool not found; apt-get install qemu-system-x86 cpio" >&2
		exit 1
	fi
done

# The sandbox tests need Landlock scopes (ABI 6, Linux 6.12), which
# bookworm's default kernel (6.1, ABI 2) lacks: take the newest 6.12 or
# later that apt offers (bookworm carries 6.12 as linux-image-6.12.*), else
# the default. Debian's kernels start Landlock by default. A cache made
# for another package is replaced.
pkg="$(apt-cache search --names-only '^linux-image-6\.1[2-9]\.[0-9]+\+deb[0-9]+-amd64$' | awk '{print $1}' | sort -V | tail -1)"
if [ -z "$pkg" ]; then
	pkg="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')"
fi
if [ ! -d kernel ] || [ "$(cat kernel.pkg 2>/dev/null)" != "$pkg" ]; then
	rm -rf kernel busybox ./*.deb
	echo "test-cgroup-vm: downloading $pkg and busybox-static"
	apt-get download -qq "$pkg" busybox-static
	dpkg-deb -x linux-image-*.deb kernel
	dpkg-deb -x busybox-static_*.deb busybox
	echo "$pkg" >kernel.pkg
fi

rm -rf initrd && mkdir -p initrd/bin initrd/proc initrd/sys initrd/dev initrd/tmp initrd/root
cp busybox/bin/busybox initrd/bin/
(cd "$root" && CGO_ENABLED=0 go test -c -o "$vm/initrd/agentproc.test" .)
cat > initrd/init <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup
echo "cgroup v2 controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
cd /tmp
/agentproc.test -test.v -test.count=1 -test.run "$(sed -n 's/.*runtests=\([^ ]*\).*/\1/p' /proc/cmdline)" 2>&1
echo "TESTS-EXIT=$?"
# Every cgroup the tests made is gone (as .ci/check-cgroups.sh checks on
# the host after make test): the trees', the ready sets', the hosts'
# agentproc-host leaves and the tests' own; the guest had none before.
left="$(find /sys/fs/cgroup -mindepth 1 -type d -name 'agentproc-*' 2>/dev/null)"
for d in $left; do echo "cgroup left by the tests: $d"; done
echo "CGROUPS-LEFT=$(echo $left | wc -w)"
bench="$(sed -n 's/.*runbench=\([^ ]*\).*/\1/p' /proc/cmdline)"
if [ -n "$bench" ]; then
	/agentproc.test -test.run '^$' -test.bench "$bench" -test.benchtime 40x -test.count 3 2>&1
	echo "BENCH-EXIT=$?"
fi
poweroff -f
INIT
chmod +x initrd/init
(cd initrd && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$vm/initrd.gz")

accel=(-accel tcg,thread=multi -cpu max)
if [ "${AGENTPROC_VM_KVM:-}" = 1 ]; then
	accel=(-enable-kvm -cpu "${AGENTPROC_VM_CPU:-host}")
fi
tests="${1:-TestLimits|TestCgroupBadParent|TestOOMScore|TestRaiseOOMScore|TestHostDeathRemoves|TestHostDeathInsideCgroupNew|TestAttackCgroupEscapeByClone3}"
# BenchmarkLimits on cgroup v2 (the host measures v1): 40 alternated pairs
# per run, three runs, about 30 s under emulation. AGENTPROC_VM_BENCH=
# (empty) skips it; a test regex given as argument skips it too.
bench="${AGENTPROC_VM_BENCH-BenchmarkLimits}"
if [ -n "${1:-}" ]; then
	bench="${AGENTPROC_VM_BENCH:-}"
fi
echo "test-cgroup-vm: running $tests${bench:+, then $bench}"
timeout 900 qemu-system-x86_64 "${accel[@]}" -smp 2 -m 2048 -nographic -no-reboot \
	-kernel kernel/boot/vmlinuz-* -initrd initrd.gz \
	-append "console=ttyS0 panic=-1 quiet runtests=$tests${bench:+ runbench=$bench}" | tee vm.log | grep -v '^=== '
grep -q '^TESTS-EXIT=0' vm.log
if ! grep -q '^CGROUPS-LEFT=0' vm.log; then
	echo "test-cgroup-vm: the tests left cgroups in the guest (listed above)" >&2
	exit 1
fi
if [ -n "$bench" ]; then
	grep -q '^BENCH-EXIT=0' vm.log
	# The medians and ratios, as make bench prints them (limits-ratio is
	# each run's own; the table's medians are over the runs).
	grep '^Benchmark' vm.log | (cd "$root" && go run ./internal/benchratio)
fi
