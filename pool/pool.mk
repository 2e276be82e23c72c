# pool/pool.mk — the device-memory pool as a static archive, plus its cmocka unit tests.
#   $(BUILD)/libnpupool_pool.a       linked into the preload library and the CLI
#   $(BUILD)/tests/unit/test_pool*   unit tests (run by tests/run.sh)

POOL_SRCS := $(wildcard pool/*.c)
POOL_OBJS := $(POOL_SRCS:%.c=$(BUILD)/obj/%.o)
POOL_LIB  := $(BUILD)/libnpupool_pool.a $(BASE_LIB)
POOL_INC  := $(BASE_INC) -Ipool

$(BUILD)/obj/pool/%.o: INC := $(POOL_INC)

$(BUILD)/libnpupool_pool.a: $(POOL_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS += $(BUILD)/libnpupool_pool.a

POOL_TEST_NAMES := $(notdir $(basename $(wildcard tests/unit/test_pool*.c)))
$(POOL_TEST_NAMES:%=$(BUILD)/obj/tests/unit/%.o): INC := $(POOL_INC)
POOL_TEST_BINS  := $(POOL_TEST_NAMES:%=$(BUILD)/tests/unit/%)

$(POOL_TEST_BINS): $(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -lm

UNIT_TESTS += $(POOL_TEST_BINS)
