# report/report.mk — reports (triggers, reporter thread, thresholds, JSON, symbolizer) and the
# allocation trace recorder, a static archive.
#
#   $(BUILD)/libnpupool_report.a        linked into build/libnpupool.so by shim/shim.mk
#   $(BUILD)/tests/unit/test_report*    cmocka unit tests
#   $(BUILD)/bench/bench_ledger         `make bench`: the pair cost with the ledger
# report/ depends on ledger/, pool/ and base/.  libdw.so.1 is NOT linked: symbolize.c dlopen()s it
# (RTLD_LOCAL) at the first symbolized report; nor is cJSON: report_cjson.c dlopen()s
# libcjson.so.1 (RTLD_LOCAL) at report_init.  The unit tests link cJSON themselves (they parse).
# Link order for users: $(REPORT_LIB) $(LEDGER_LIB) $(POOL_LIB) $(REPORT_LDLIBS).

REPORT_SRCS   := $(wildcard report/*.c)
REPORT_OBJS   := $(REPORT_SRCS:%.c=$(BUILD)/obj/%.o)
REPORT_INC    := $(BASE_INC) -Ipool -Iledger -Ireport
REPORT_LIB    := $(BUILD)/libnpupool_report.a
REPORT_LDLIBS := -ldl

$(BUILD)/obj/report/%.o: INC := $(REPORT_INC)

$(REPORT_LIB): $(REPORT_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

ALL_TARGETS += $(REPORT_LIB)

REPORT_TEST_NAMES := test_report test_report_background test_report_symbolize test_report_metrics
REPORT_TEST_BINS  := $(REPORT_TEST_NAMES:%=$(BUILD)/tests/unit/%)
REPORT_TEST_LIBS  := $(REPORT_LIB) $(LEDGER_LIB) $(POOL_LIB)
$(REPORT_TEST_NAMES:%=$(BUILD)/obj/tests/unit/%.o): INC := $(REPORT_INC)

$(REPORT_TEST_BINS): $(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(REPORT_TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(REPORT_TEST_LIBS) -lcmocka -lcjson -lm $(REPORT_LDLIBS) $(LDFLAGS)

UNIT_TESTS += $(REPORT_TEST_BINS)

$(BUILD)/obj/bench/bench_ledger.o: INC := $(REPORT_INC)
$(BUILD)/bench/bench_ledger: $(BUILD)/obj/bench/bench_ledger.o $(REPORT_TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(REPORT_TEST_LIBS) $(REPORT_LDLIBS) -lm $(LDFLAGS)

BENCH_TARGETS += $(BUILD)/bench/bench_ledger
