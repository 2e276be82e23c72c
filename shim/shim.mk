# shim/shim.mk — the preload library build/libnpupool.so.
# It links the report, ledger, pool and base archives statically, exports only the ACL hooks,
# dlsym, dlvsym and npupool_* (shim/exports.map), and links NO libascendcl: real functions are
# found at run time (real.c).
SHIM_SRCS := $(wildcard shim/*.c)
SHIM_OBJS := $(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)
SHIM_LIB  := $(BUILD)/libnpupool.so
SHIM_INC  := -Iinclude $(REPORT_INC) -Ishim

$(BUILD)/obj/shim/%.o: INC := $(SHIM_INC)

$(SHIM_LIB): $(SHIM_OBJS) $(REPORT_LIB) $(LEDGER_LIB) $(POOL_LIB) shim/exports.map
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(SHIM_OBJS) $(REPORT_LIB) $(LEDGER_LIB) $(POOL_LIB) \
	    $(LIB_LDFLAGS) \
	    -Wl,--version-script=shim/exports.map -Wl,-z,now -Wl,--no-undefined $(REPORT_LDLIBS)

ALL_TARGETS += $(SHIM_LIB)

# dlsym/dlvsym and the ELF reader run inside sanitizer runtimes' start-up, before their shadow
# memory exists: never instrument them.
$(BUILD)/obj/shim/dl_hooks.o $(BUILD)/obj/shim/elf_lookup.o: CFLAGS := $(filter-out -fsanitize=%,$(CFLAGS))

# The option table's unit test links options.o alone (with base); `make options-table` prints
# the README's variable table from it.
$(BUILD)/obj/tests/unit/test_shim_options.o: INC := $(SHIM_INC)
$(BUILD)/tests/unit/test_shim_options: $(BUILD)/obj/tests/unit/test_shim_options.o \
                                       $(BUILD)/obj/shim/options.o $(BASE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -lm

UNIT_TESTS += $(BUILD)/tests/unit/test_shim_options

# The pins' unit test links pin.o, the per-thread records it pins through (tstate.o) and base/
# (barrier.h).
$(BUILD)/obj/tests/unit/test_shim_pin.o: INC := $(SHIM_INC)
$(BUILD)/tests/unit/test_shim_pin: $(BUILD)/obj/tests/unit/test_shim_pin.o $(BUILD)/obj/shim/pin.o \
                                   $(BUILD)/obj/shim/tstate.o $(BASE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka

UNIT_TESTS += $(BUILD)/tests/unit/test_shim_pin

.PHONY: options-table
options-table: $(BUILD)/tests/unit/test_shim_options
	@$< --markdown
