# mk/aarch64.mk — the aarch64 (Kunpeng) build, cross-compiled, and its tests under qemu-user
# (included by the top Makefile).  Debian packages: gcc-aarch64-linux-gnu, g++-aarch64-linux-gnu,
# libc6-dev-arm64-cross, qemu-user, and the arm64 libraries (dpkg --add-architecture arm64):
# libunwind-dev, libcjson-dev, libdw-dev, libelf-dev, libcmocka-dev.  mk/deps.sh names (as root:
# installs) what is missing, as for the native build.
#
#   make cross-aarch64   the library, the command and the test programs in $(AARCH64_BUILD)
#   make test-aarch64    runs, under $(AARCH64_EMU), the unit tests and case scripts whose names
#                        contain one of $(AARCH64_TESTS): base, pool, ledger, tool and shim-option
#                        unit tests, and the shim's integration cases (tests/run.sh with EMU set).
# What cannot run under qemu-user (without binfmt_misc, which needs the host's root), and why:
#   - test_fakeacl: 5 of its 24 tests re-execute the test binary (/proc/self/exe) with other
#     variables, and qemu-user does not follow an execve of a foreign binary: left out;
#   - shim_devices' 3000-reset loop and shim_fork's fork_dlopen: each maps and unmaps a large
#     reservation thousands of times, and qemu-user's own memory grows with each (15-24 GiB
#     measured, then the OOM killer): skipped (the rest of those cases runs);
#   - shim_valgrind: valgrind runs programs of its own architecture only: skipped.
# The report, ledger-leak and tool cases and the sanitizer builds are not run emulated.
# Measured on the 2-core machine: 1-3 minutes from scratch (cross build included), 99 tests.
# On an aarch64 machine none of this is needed: `make` and `make test` build and test natively.

AARCH64_TRIPLET ?= aarch64-linux-gnu
AARCH64_BUILD   ?= build/aarch64
# The programs run on the arm64 C library of the host's multiarch tree (libc6:arm64, which the
# arm64 libraries pull in): its loader is /lib/ld-linux-aarch64.so.1.  The cross package's
# loader (/usr/$(AARCH64_TRIPLET), qemu -L) is only a fallback: it would load libc6:arm64's
# libc.so.6 next to a loader of another build, and fork() then hangs in the child.
AARCH64_SYSROOT ?= $(if $(wildcard /lib/ld-linux-aarch64.so.1),,/usr/$(AARCH64_TRIPLET))
AARCH64_QEMU    ?= $(firstword $(shell command -v qemu-aarch64 qemu-aarch64-static 2>/dev/null) qemu-aarch64)
AARCH64_EMU     ?= $(AARCH64_QEMU)$(if $(AARCH64_SYSROOT), -L $(AARCH64_SYSROOT))
AARCH64_TESTS   ?= test_base test_pool test_ledger test_tool shim_

.PHONY: cross-aarch64 test-aarch64
cross-aarch64:
	$(MAKE) --no-print-directory BUILD=$(AARCH64_BUILD) CC=$(AARCH64_TRIPLET)-gcc \
	    CXX=$(AARCH64_TRIPLET)-g++ AR=$(AARCH64_TRIPLET)-ar DEPS_ARCH=arm64 tests

test-aarch64: cross-aarch64
	@$(DEPS_ENV) sh mk/deps.sh emu
	EMU='$(AARCH64_EMU)' TEST_FILTER='$(AARCH64_TESTS)' bash tests/run.sh $(AARCH64_BUILD)
