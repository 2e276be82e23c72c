# npupool — top-level Makefile.
#
#   make            build/libnpupool.so, build/fakeacl/libascendcl.so, build/npupool, tests
#   make test       every test (plain build, then ASan+UBSan and TSan builds) -> "N passed, M failed"
#   make demo       the sample application in front of the shim on the fake runtime
#   make bench      benchmarks (not part of the tests)
#   make SAN=asan   an ASan+UBSan build in build/asan (SAN=tsan: build/tsan)
#
# Each directory adds its own rules in a fragment (*/*.mk) using the variables below; a fragment
# appends its outputs to ALL_TARGETS (built by `make`) and BENCH_TARGETS.

SAN ?=
ifeq ($(SAN),)
BUILD ?= build
SANFLAGS :=
else ifeq ($(SAN),asan)
BUILD ?= build/asan
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -DNPUPOOL_DEBUG=2
else ifeq ($(SAN),tsan)
BUILD ?= build/tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer -DNPUPOOL_DEBUG=2
else
$(error SAN must be empty, asan or tsan)
endif

CC      ?= cc
CXX     ?= c++
OPT     ?= -O2
CFLAGS  := $(OPT) -g -std=gnu11 -Wall -Wextra -fPIC -pthread $(SANFLAGS) $(EXTRA_CFLAGS)
# Include paths are per target: each fragment sets INC for its own objects (pattern-specific), so
# a file can include only the headers of the layers below it (docs/architecture.md).
INC     :=
# TRANSITIONAL (removed when every fragment sets its own): everything else sees every folder.
$(BUILD)/obj/%.o: INC := -Iinclude -Ibase -Ipool -Ishim -Iledger -Ireport -Itools -Ibench
LDFLAGS := -pthread $(SANFLAGS) $(EXTRA_LDFLAGS)

ALL_TARGETS   :=
BENCH_TARGETS :=
DEPS_STAMP    := build/.deps-ok

.PHONY: all deps test demo bench clean fuzz
all: deps
# `all` gets its real prerequisites after the fragments are included (see bottom).

deps: $(DEPS_STAMP)
$(DEPS_STAMP): mk/deps.sh
	@mkdir -p $(dir $@)
	@sh mk/deps.sh
	@touch $@

# Objects: $(BUILD)/obj/<path>.o from <path>.c, with header dependencies.
$(BUILD)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) -MMD -MP -c $< -o $@
$(BUILD)/obj/%.o: %.cc | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(filter-out -std=gnu11,$(CFLAGS)) $(INC) -std=gnu++17 -MMD -MP -c $< -o $@

include $(wildcard base/base.mk pool/pool.mk tests/fakeacl/fakeacl.mk ledger/ledger.mk report/report.mk shim/shim.mk tools/tools.mk examples/examples.mk tests/tests.mk bench/bench.mk)

all: $(ALL_TARGETS)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

clean:
	rm -rf build

.PHONY: format check-layers
format:
	git ls-files '*.c' '*.h' '*.cc' | xargs clang-format -i
check-layers: all
	sh mk/check-layers.sh $(BUILD)
