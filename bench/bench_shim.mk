# bench/bench_shim.mk — `make bench`: the shim's own benchmark (bench/bench_shim.c, issue 13).
#   $(BUILD)/bench/bench_shim   a free+malloc pair through LD_PRELOAD=libnpupool.so on the fake
#                               runtime against glibc in the same process (1,000 and 100,000 live,
#                               backtraces off and on), and 1..8 threads allocating at once
# An ordinary ACL program: it links the fake runtime and nothing of npupool; it runs itself as
# children with LD_PRELOAD=$(SHIM_LIB) (found next to it: ../libnpupool.so).  bench.mk's loop runs
# it with no arguments (BENCH_ARGS_SHIM adds some when run here: --runs N, --pairs N, --quick).
# Plain build only, like every benchmark.

ifeq ($(SAN),)
BENCH_SHIM := $(BUILD)/bench/bench_shim
$(BUILD)/obj/bench/bench_shim.o: CFLAGS += -O2
$(BUILD)/obj/bench/bench_shim.o: INC := -Iinclude -Ibench/peers

$(BENCH_SHIM): $(BUILD)/obj/bench/bench_shim.o $(BUILD)/obj/bench/peers/ptimer.o $(FAKEACL_LIB) \
               | $(SHIM_LIB)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(filter %.o,$^) -L$(FAKEACL_DIR) -lascendcl -Wl,-rpath,'$$ORIGIN/../fakeacl' \
	    $(LDFLAGS) -ldl -lm

BENCH_TARGETS += $(BENCH_SHIM)

.PHONY: bench-shim
bench-shim: $(BENCH_SHIM)
	$(BENCH_SHIM) $(BENCH_ARGS_SHIM)
endif
