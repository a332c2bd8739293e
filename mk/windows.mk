# Windows targets, included by the top-level Makefile.
#
# test-windows runs the package's tests as a Windows binary under Wine;
# install-windows-deps installs Wine and MinGW-w64 (Debian, needs root).

.PHONY: test-windows install-windows-deps

test-windows:
	bash .ci/test-windows.sh

install-windows-deps:
	bash .ci/install-windows-deps.sh
