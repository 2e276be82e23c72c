# tests/fakeacl/fakeacl.mk — the fake Ascend runtime and its unit test.
#
#   $(BUILD)/fakeacl/libascendcl.so   the fake runtime (soname libascendcl.so), host memory behind
#                                     device pointers; test control in tests/fakeacl/fakeacl_ctl.h
#   $(BUILD)/tests/unit/test_fakeacl  cmocka test of the fake, linked against it (rpath $ORIGIN)
#
# Programs that should run on the fake link with  -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH)
# (FAKEACL_RPATH suits a binary in $(BUILD)/<dir>/<dir>/; others set their own rpath or LD_LIBRARY_PATH).

FAKEACL_SRCS  := $(wildcard tests/fakeacl/*.c)
FAKEACL_OBJS  := $(patsubst %.c,$(BUILD)/obj/%.o,$(FAKEACL_SRCS))
FAKEACL_DIR   := $(BUILD)/fakeacl
FAKEACL_LIB   := $(FAKEACL_DIR)/libascendcl.so
FAKEACL_RPATH := -Wl,-rpath,'$$ORIGIN/../../fakeacl'

$(FAKEACL_LIB): $(FAKEACL_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libascendcl.so -o $@ $(FAKEACL_OBJS) $(LDFLAGS)

ALL_TARGETS += $(FAKEACL_LIB)

$(BUILD)/tests/unit/test_fakeacl: $(BUILD)/obj/tests/unit/test_fakeacl.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH) -lcmocka $(LDFLAGS)

UNIT_TESTS += $(BUILD)/tests/unit/test_fakeacl
