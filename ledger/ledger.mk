# ledger/ledger.mk — the allocation ledger and the JSON reports, as a static archive.
#
#   $(BUILD)/libnpupool_ledger.a        linked into build/libnpupool.so by shim/shim.mk
#   LEDGER_LDLIBS                       what a program or library linking the archive adds:
#                                       libcjson only.  libunwind.so.8 and libdw.so.1 are NOT linked:
#                                       ledger/ opens them with dlopen(RTLD_LOCAL) (libunwind at
#                                       ledger_init, libdw at the first symbolized report), so their
#                                       `backtrace`/`_Unwind_*` never enter the host's global scope.
#   $(BUILD)/tests/unit/test_ledger*    cmocka unit tests (UNIT_TESTS)
#   $(BUILD)/tests/unit/test_report*
#   $(BUILD)/tests/programs/...         programs the case scripts tests/cases/{ledger,report}_*.sh run
#   $(BUILD)/bench/bench_ledger         `make bench`
#
# Link order for users of the archive: $(LEDGER_LIB) $(POOL_LIB) ... $(LEDGER_LDLIBS).  The archive
# calls pool_bucket_of/pool_get_stats/pool_walk (pool/) and log_write (shim/log.c).

# Headers of ledger/ are included as "ledger.h", "report.h" (the shim does too).
CFLAGS += -Iledger

LEDGER_SRCS := ledger/ledger.c ledger/stack.c ledger/symbolize.c ledger/report.c ledger/report_json.c \
               ledger/ledger_util.c
LEDGER_OBJS := $(LEDGER_SRCS:%.c=$(BUILD)/obj/%.o)
LEDGER_LIB  := $(BUILD)/libnpupool_ledger.a
LEDGER_LDLIBS := -lcjson -ldl

$(LEDGER_LIB): $(LEDGER_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS += $(LEDGER_LIB)

# ---- unit tests: the archive + the pool + the shim's log sink (no shim, no runtime) -------------
LEDGER_TEST_LIBS := $(LEDGER_LIB) $(POOL_LIB)
LEDGER_TEST_NAMES := test_ledger test_ledger_dlopen test_report test_report_background
LEDGER_TEST_BINS := $(LEDGER_TEST_NAMES:%=$(BUILD)/tests/unit/%)

# The dlopen test's library calls ledger_capture_stack from its constructor: the test exports it.
$(BUILD)/tests/unit/test_ledger_dlopen: LEDGER_TEST_EXTRA := -Wl,--export-dynamic-symbol=ledger_capture_stack
$(BUILD)/tests/unit/test_ledger_dlopen: | $(BUILD)/tests/programs/libledger_ctor.so

$(LEDGER_TEST_BINS): $(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(LEDGER_TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LEDGER_TEST_LIBS) $(LEDGER_TEST_EXTRA) -lcmocka $(LEDGER_LDLIBS) -lm $(LDFLAGS)

UNIT_TESTS += $(LEDGER_TEST_BINS)

# ---- test programs -----------------------------------------------------------------------------
LEDGER_PROG_DIR := $(BUILD)/tests/programs

# A library whose constructor and functions capture stacks (dlopen/dlclose vs unwinding).
$(LEDGER_PROG_DIR)/libledger_ctor.so: tests/programs/ledger_ctor.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -o $@ $< $(LDFLAGS)

ALL_TARGETS += $(LEDGER_PROG_DIR)/libledger_ctor.so

# Ordinary ACL programs for the end-to-end cases (tests/cases/ledger_*.sh, report_*.sh): linked
# against the fake runtime, WITHOUT -rdynamic (static functions are named from .symtab only).
LEDGER_E2E_C  := leaks oom_puzzle signal_threads slow_leak dlopen_stress reset_finalize threshold
LEDGER_E2E_CC := cxx_throw
LEDGER_E2E_BINS := $(LEDGER_E2E_C:%=$(LEDGER_PROG_DIR)/%) $(LEDGER_E2E_CC:%=$(LEDGER_PROG_DIR)/%)

$(LEDGER_E2E_C:%=$(LEDGER_PROG_DIR)/%): $(LEDGER_PROG_DIR)/%: $(BUILD)/obj/tests/programs/%.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH) $(LDFLAGS) -ldl

$(LEDGER_E2E_CC:%=$(LEDGER_PROG_DIR)/%): $(LEDGER_PROG_DIR)/%: $(BUILD)/obj/tests/programs/%.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $< -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH) $(LDFLAGS)

ALL_TARGETS += $(LEDGER_E2E_BINS)

# ---- benchmark ---------------------------------------------------------------------------------
$(BUILD)/bench/bench_ledger: $(BUILD)/obj/bench/bench_ledger.o $(LEDGER_TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LEDGER_TEST_LIBS) $(LEDGER_LDLIBS) -lm $(LDFLAGS)

BENCH_TARGETS += $(BUILD)/bench/bench_ledger
