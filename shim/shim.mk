# shim/shim.mk — the preload library build/libnpupool.so.
# It links the pool (and the ledger when present) statically, exports only the ACL hooks, dlsym,
# dlvsym and npupool_* (shim/exports.map), and links NO libascendcl: real functions are found at
# run time with RTLD_NEXT.
SHIM_SRCS := $(wildcard shim/*.c)
SHIM_OBJS := $(SHIM_SRCS:%.c=$(BUILD)/obj/%.o)
SHIM_LIB  := $(BUILD)/libnpupool.so

$(SHIM_LIB): $(SHIM_OBJS) $(POOL_LIB) $(LEDGER_LIB) shim/exports.map
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(SHIM_OBJS) $(POOL_LIB) $(LEDGER_LIB) $(LDFLAGS) \
	    -Wl,--version-script=shim/exports.map -Wl,-z,now -Wl,--no-undefined $(LEDGER_LDLIBS) -ldl

ALL_TARGETS += $(SHIM_LIB)

# dlsym/dlvsym and the ELF reader run inside sanitizer runtimes' start-up, before their shadow
# memory exists: never instrument them.
$(BUILD)/obj/shim/dl_hooks.o $(BUILD)/obj/shim/elf_lookup.o: CFLAGS := $(filter-out -fsanitize=%,$(CFLAGS))
