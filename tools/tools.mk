# tools/tools.mk — the command-line tool $(BUILD)/npupool, the trace generator, their unit tests,
# and `make fuzz` (libFuzzer targets for the report and trace readers and the suppressions
# parser; not part of `make test`).
#
#   $(BUILD)/npupool                 the CLI (links the pool archive: replay runs the shim's own pool)
#   $(BUILD)/traces/gen              trace generator (traces/gen.c); `make traces` rewrites traces/*
#   $(BUILD)/tests/unit/test_tool*   cmocka unit tests
#   make fuzz [FUZZ_SECONDS=20]      builds build/fuzz/* with clang and runs each target briefly
#
# Layers: tools/ sees base/ (everything below), pool/ (replay runs the real pool) and the format
# contract (base/wire.h), never shim/, ledger/ or bench/.

TOOLS_INC      := $(POOL_INC) -Itools
TOOLS_LIB_SRCS := tools/tools.c tools/cli.c tools/input.c tools/jsonscan.c tools/report_read.c \
                  tools/triage.c tools/pickle.c tools/export_viz.c tools/export_perfetto.c \
                  tools/site.c tools/trace_read.c tools/replay.c tools/replay_firstfit.c \
                  tools/firstfit.c tools/symfile.c tools/ledger_read.c
TOOLS_CMD_SRCS := tools/main.c tools/commands.c tools/cmd_summary.c tools/cmd_leaks.c tools/cmd_diff.c \
                  tools/cmd_flame.c tools/cmd_map.c tools/cmd_symbolize.c tools/cmd_replay.c \
                  tools/cmd_export.c tools/cmd_recover.c \
                  tools/cmd_version.c
TOOLS_LIB_OBJS := $(TOOLS_LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TOOLS_CMD_OBJS := $(TOOLS_CMD_SRCS:%.c=$(BUILD)/obj/%.o)
TOOLS_LDLIBS   := -lcjson -ldw -lelf -lm -ldl
NPUPOOL_CLI    := $(BUILD)/npupool

$(BUILD)/obj/tools/%.o: INC := $(TOOLS_INC)

$(NPUPOOL_CLI): $(TOOLS_CMD_OBJS) $(TOOLS_LIB_OBJS) $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(TOOLS_LDLIBS)

TRACE_GEN := $(BUILD)/traces/gen
$(BUILD)/obj/traces/%.o: INC := $(BASE_INC) -Itools
$(TRACE_GEN): $(BUILD)/obj/traces/gen.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

ALL_TARGETS += $(NPUPOOL_CLI) $(TRACE_GEN)

# Shipped traces: small, deterministic, made by the generator (tests/cases/tool_replay.sh checks
# that the files in the repo are exactly what the generator writes).
.PHONY: traces
traces: $(TRACE_GEN)
	$(TRACE_GEN) serving  --events 12000 --seed 1 -o traces/serving.trace
	$(TRACE_GEN) training --events 12000 --seed 1 -o traces/training.trace
	$(TRACE_GEN) service  --events 12000 --seed 1 -o traces/service.trace
	$(TRACE_GEN) random   --events 12000 --seed 1 --max-mib 16 -o traces/rmm_random.trace
	$(TRACE_GEN) random   --events 2000  --seed 2 --max-mib 4 --format rmm -o traces/rmm_random_small.csv

# Unit tests.  test_tool_cli links every command too (it checks their tables and help texts).
# test_tool_trace links the trace recorder (report/trace.c, the writer of the format) to check the
# reader against it: that one test also sees report/ and ledger/ headers; test_tool_ledger does the
# same for the ledger file (ledger/ledger_file.c).
TOOLS_TEST_NAMES := test_tool_trace test_tool_replay test_tool_report test_tool_cli test_tool_pickle \
                    test_tool_ledger
TOOLS_TEST_BINS  := $(TOOLS_TEST_NAMES:%=$(BUILD)/tests/unit/%)
$(TOOLS_TEST_NAMES:%=$(BUILD)/obj/tests/unit/%.o): INC := $(TOOLS_INC)
$(BUILD)/obj/tests/unit/test_tool_trace.o: INC := $(TOOLS_INC) -Ireport
$(BUILD)/obj/tests/unit/test_tool_ledger.o: INC := $(TOOLS_INC) -Iledger

$(BUILD)/tests/unit/test_tool_trace: $(BUILD)/obj/tests/unit/test_tool_trace.o $(REPORT_LIB) \
                                     $(TOOLS_LIB_OBJS) $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(TOOLS_LDLIBS)
# test_tool_ledger links the ledger (the writer of the ledger file) to check the reader against it.
$(BUILD)/tests/unit/test_tool_ledger: $(BUILD)/obj/tests/unit/test_tool_ledger.o $(LEDGER_LIB) \
                                      $(TOOLS_LIB_OBJS) $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(TOOLS_LDLIBS)
$(BUILD)/tests/unit/test_tool_cli: $(BUILD)/obj/tests/unit/test_tool_cli.o \
                                   $(filter-out $(BUILD)/obj/tools/main.o,$(TOOLS_CMD_OBJS)) \
                                   $(TOOLS_LIB_OBJS) $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(TOOLS_LDLIBS)
TOOLS_PLAIN_TESTS := $(BUILD)/tests/unit/test_tool_replay $(BUILD)/tests/unit/test_tool_report \
                     $(BUILD)/tests/unit/test_tool_pickle
$(TOOLS_PLAIN_TESTS): $(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(TOOLS_LIB_OBJS) $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(TOOLS_LDLIBS)
UNIT_TESTS += $(TOOLS_TEST_BINS)

# ---- fuzzing (clang + libFuzzer + ASan; separate build dir; never part of `make test`) ------------
# NPUPOOL_DEBUG=2: the readers' internal assertions abort, so the fuzzer reports them.
FUZZ_DIR     := build/fuzz
FUZZ_SECONDS ?= 20
FUZZ_CC      ?= clang
FUZZ_CFLAGS  := -g -O1 -std=gnu11 -Wall -Wextra -DNPUPOOL_DEBUG=2 $(TOOLS_INC) \
                -fsanitize=fuzzer,address,undefined
FUZZ_COMMON  := tools/tools.c tools/input.c tools/jsonscan.c tools/report_read.c tools/trace_read.c \
                tools/site.c tools/ledger_read.c $(BASE_SRCS)
FUZZ_TARGETS := $(FUZZ_DIR)/fuzz_report $(FUZZ_DIR)/fuzz_trace $(FUZZ_DIR)/fuzz_suppress \
                $(FUZZ_DIR)/fuzz_ledger

$(FUZZ_DIR)/%: fuzz/%.c $(FUZZ_COMMON) $(wildcard tools/*.h base/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_COMMON) -lcjson -lm

fuzz: $(FUZZ_TARGETS)
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS)
