# tests/tests.mk — `make test`: the plain build, then ASan+UBSan and TSan builds, all through
# tests/run.sh, which prints the one closing line "N passed, M failed, K skipped".
# Unit-test fragments append their cmocka binaries to UNIT_TESTS; case scripts live in tests/cases/.
#
# Integration programs (tests/programs/*.c) are plain ACL applications: they include only
# <acl/acl.h>, link the fake runtime (SHIM_DLOPEN_PROGRAMS dlopen() it instead) and know nothing of npupool.
UNIT_TESTS ?=
PROG_DIR := $(BUILD)/tests/programs
$(BUILD)/obj/tests/programs/%.o: INC := -Iinclude

SHIM_TEST_PROGRAMS := basic threads fork_threads exhaust devices reset_loop guest expandable vmm_threads \
                      contexts
SHIM_DLOPEN_PROGRAMS := dlsym_lookup fork_dlopen dlopen_abs
SHIM_TEST_BINS := $(SHIM_TEST_PROGRAMS:%=$(BUILD)/tests/programs/%) $(SHIM_DLOPEN_PROGRAMS:%=$(BUILD)/tests/programs/%)

$(SHIM_TEST_PROGRAMS:%=$(BUILD)/tests/programs/%): $(BUILD)/tests/programs/%: $(BUILD)/obj/tests/programs/%.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH) $(LDFLAGS)

$(SHIM_DLOPEN_PROGRAMS:%=$(BUILD)/tests/programs/%): $(BUILD)/tests/programs/%: $(BUILD)/obj/tests/programs/%.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LDFLAGS) -ldl

# Programs for the ledger and report cases (tests/cases/ledger_*.sh, report_*.sh): linked WITHOUT
# -rdynamic (static functions are named from .symtab only).
E2E_C  := leaks oom_puzzle signal_threads slow_leak dlopen_stress reset_finalize threshold chunk_frag postmortem many_live \
          deep_leak
E2E_CC := cxx_throw cxx_abort
E2E_BINS := $(E2E_C:%=$(PROG_DIR)/%) $(E2E_CC:%=$(PROG_DIR)/%)

$(E2E_C:%=$(PROG_DIR)/%): $(PROG_DIR)/%: $(BUILD)/obj/tests/programs/%.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH) $(LDFLAGS) -ldl

$(E2E_CC:%=$(PROG_DIR)/%): $(PROG_DIR)/%: $(BUILD)/obj/tests/programs/%.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CXX) -o $@ $< -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH) $(LDFLAGS)

# Native code the Python test programs (tests/programs/python/) call through ctypes: a C thread
# without a Python thread state, C calling back into Python, an allocation with a pending Python
# exception.  An ordinary ACL library: no Python headers.
PYHELPER := $(PROG_DIR)/libpyhelper.so
$(PYHELPER): $(BUILD)/obj/tests/programs/python/pyhelper.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $< -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH) $(LDFLAGS)

# npupool's line-table decoder against the interpreter's own answers (tests/cases/python_layout.sh).
PY_LINES_CHECK := $(PROG_DIR)/py_lines_check
$(BUILD)/obj/tests/programs/python/py_lines_check.o: INC := $(LEDGER_INC)
$(PY_LINES_CHECK): $(BUILD)/obj/tests/programs/python/py_lines_check.o $(LEDGER_LIB) $(BASE_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LEDGER_LIB) $(BASE_LIB) -ldl $(LDFLAGS)

# postmortem's dlopen mode: one source, two libraries (leak_in_a, leak_in_b).
$(PROG_DIR)/libpostmortem_%.so: tests/programs/postmortem_lib.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iinclude -DLIB=$* $(if $(filter b,$*),-DPAD) -shared -o $@ $< $(LDFLAGS)

ALL_TARGETS += $(PROG_DIR)/libpostmortem_a.so $(PROG_DIR)/libpostmortem_b.so

# The fake runtime once more, without a DT_SONAME (as a runtime may be shipped), for the
# discovery case (tests/cases/shim_discovery.sh): npupool must find it by file name.
FAKEACL_NOSONAME := $(BUILD)/fakeacl-nosoname/libascendcl.so
$(FAKEACL_NOSONAME): $(FAKEACL_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(FAKEACL_OBJS) $(LDFLAGS)

# A host program with cJSON functions of its own, exported (-rdynamic): shim_selfcontained.sh.
$(PROG_DIR)/cjson_host: $(BUILD)/obj/tests/programs/cjson_host.o $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CC) -rdynamic -o $@ $< -L$(FAKEACL_DIR) -lascendcl $(FAKEACL_RPATH) $(LDFLAGS)

ALL_TARGETS += $(UNIT_TESTS) $(SHIM_TEST_BINS) $(E2E_BINS) $(PROG_DIR)/cjson_host $(FAKEACL_NOSONAME) \
               $(PYHELPER) $(PY_LINES_CHECK)

.PHONY: test test-plain
test: tests
	$(MAKE) --no-print-directory SAN=asan tests
	$(MAKE) --no-print-directory SAN=tsan tests
	bash tests/run.sh build build/asan build/tsan

test-plain: tests
	bash tests/run.sh $(BUILD)
