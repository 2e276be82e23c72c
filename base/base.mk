# base/base.mk — the base layer: what every other layer may use, and which uses nothing of npupool.
#   $(BUILD)/libnpupool_base.a      log sink, formatting, io, clocks, locks, path patterns, rank, the
#                                   address hash map, parsers, assertions, build ids, the version
#                                   (vocab.h, wire.h: headers; version.c: the top Makefile's rule)
#   $(BUILD)/tests/unit/test_base*  cmocka unit tests

BASE_SRCS := $(wildcard base/*.c)
BASE_OBJS := $(BASE_SRCS:%.c=$(BUILD)/obj/%.o)
BASE_LIB  := $(BUILD)/libnpupool_base.a
BASE_INC  := -Ibase

$(BUILD)/obj/base/%.o: INC := $(BASE_INC)

$(BASE_LIB): $(BASE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS += $(BASE_LIB)

BASE_TEST_NAMES := $(notdir $(basename $(wildcard tests/unit/test_base_*.c)))
BASE_TEST_BINS  := $(BASE_TEST_NAMES:%=$(BUILD)/tests/unit/%)
$(BASE_TEST_NAMES:%=$(BUILD)/obj/tests/unit/%.o): INC := $(BASE_INC)

$(BASE_TEST_BINS): $(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(BASE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -lm

UNIT_TESTS += $(BASE_TEST_BINS)
