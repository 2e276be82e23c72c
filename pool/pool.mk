# pool/pool.mk — the device-memory pool as a static archive, plus its cmocka unit tests.
#   $(BUILD)/libnpupool_pool.a       linked into the preload library and the CLI
#   $(BUILD)/tests/unit/test_pool*   unit tests (run by tests/run.sh)

POOL_SRCS := pool/pool.c pool/tlsf.c pool/desc.c pool/slab.c pool/addrmap.c pool/pool_stats.c pool/pool_check.c
POOL_OBJS := $(POOL_SRCS:%.c=$(BUILD)/obj/%.o)
POOL_LIB  := $(BUILD)/libnpupool_pool.a

$(POOL_LIB): $(POOL_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS += $(POOL_LIB)

POOL_TEST_NAMES := test_pool test_pool_random test_pool_threads test_pool_addrmap
POOL_TEST_BINS  := $(POOL_TEST_NAMES:%=$(BUILD)/tests/unit/%)

$(POOL_TEST_BINS): $(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -lm

UNIT_TESTS += $(POOL_TEST_BINS)
