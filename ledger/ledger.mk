# ledger/ledger.mk — the allocation ledger (records, stack capture and interning), a static archive.
#
#   $(BUILD)/libnpupool_ledger.a        linked into build/libnpupool.so by shim/shim.mk
#   $(BUILD)/tests/unit/test_ledger*    cmocka unit tests
# The ledger depends on base/ only.  libunwind.so.8 is NOT linked: the ledger dlopen()s it
# (RTLD_LOCAL) at ledger_init, so its `backtrace`/`_Unwind_*` never enter the host's global scope.
# Link order for users: $(LEDGER_LIB) ... $(BASE_LIB) -ldl.

LEDGER_SRCS := $(wildcard ledger/*.c)
LEDGER_OBJS := $(LEDGER_SRCS:%.c=$(BUILD)/obj/%.o)
LEDGER_INC  := $(BASE_INC) -Iledger
LEDGER_LIB  := $(BUILD)/libnpupool_ledger.a

$(BUILD)/obj/ledger/%.o: INC := $(LEDGER_INC)

$(LEDGER_LIB): $(LEDGER_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS += $(LEDGER_LIB)

LEDGER_TEST_NAMES := test_ledger test_ledger_dlopen test_ledger_py test_ledger_unwind
LEDGER_TEST_BINS := $(LEDGER_TEST_NAMES:%=$(BUILD)/tests/unit/%)
$(LEDGER_TEST_NAMES:%=$(BUILD)/obj/tests/unit/%.o): INC := $(LEDGER_INC)

# The dlopen test's library calls ledger_stack_capture from its constructor: the test exports it.
$(BUILD)/tests/unit/test_ledger_dlopen: LEDGER_TEST_EXTRA := -Wl,--export-dynamic-symbol=ledger_stack_capture
$(BUILD)/tests/unit/test_ledger_dlopen: | $(BUILD)/tests/programs/libledger_ctor.so

$(LEDGER_TEST_BINS): $(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(LEDGER_LIB) $(BASE_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LEDGER_LIB) $(BASE_LIB) $(LEDGER_TEST_EXTRA) -lcmocka -ldl -lm $(LDFLAGS)

UNIT_TESTS += $(LEDGER_TEST_BINS)

# A library whose constructor and functions capture stacks (dlopen/dlclose vs unwinding).
$(BUILD)/tests/programs/libledger_ctor.so: tests/programs/ledger_ctor.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared -o $@ $< $(LDFLAGS)

ALL_TARGETS += $(BUILD)/tests/programs/libledger_ctor.so
