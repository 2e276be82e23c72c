# bench/bench.mk — `make bench`: pool benchmarks (plain build only, -O2; not part of the tests).
#   $(BUILD)/bench/bench_pool   free+malloc pair latency: npupool (block and vmm backing) vs glibc
#                               vs the seed's first fit; the vmm pool's slow paths (dlopen()s the
#                               fake runtime for their cost over a runtime)
#   $(BUILD)/bench/bench_frag   fragmentation and minimal pool size on the seed's tensor scenario
#   bench/settle.sh             before each program: waits (at most 4 minutes; 30 s once a wait
#                               of the run ran out) until the 1-minute load average is below 1
#                               (CPUs / 4 on more than 4 CPUs), and prints it
#   bench/bench_knobs.sh        last: the pool rebuilt with one slab knob changed at a time
#                               ($(BUILD)/knobs/NAME), its fragmentation and pair beside the
#                               shipped build's (where the design trades one figure for another)
# BENCH_ARGS_POOL (default empty = 200000 timed pairs) is passed to bench_pool.

ifeq ($(SAN),)
BENCH_OBJS := $(BUILD)/obj/bench/bench_pool.o $(BUILD)/obj/bench/bench_frag.o
$(BENCH_OBJS): CFLAGS += -O2
$(BENCH_OBJS): INC := $(POOL_INC) -Itools

$(BUILD)/bench/bench_pool: $(BUILD)/obj/bench/bench_pool.o $(BUILD)/obj/tools/firstfit.o \
                           $(POOL_LIB) | $(FAKEACL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter-out $(FAKEACL_LIB),$^) -lm -ldl

$(BUILD)/bench/bench_frag: $(BUILD)/obj/bench/bench_frag.o $(BUILD)/obj/tools/firstfit.o \
                           $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lm

BENCH_TARGETS += $(BUILD)/bench/bench_pool $(BUILD)/bench/bench_frag

SETTLE_STAMP := $(BUILD)/bench/.settle-ran-out

bench: $(BENCH_TARGETS)
	@rm -f $(SETTLE_STAMP)
	@sh bench/settle.sh $(SETTLE_STAMP)
	$(BUILD)/bench/bench_pool $(BENCH_ARGS_POOL)
	$(BUILD)/bench/bench_frag
	@for b in $(filter-out $(BUILD)/bench/bench_pool $(BUILD)/bench/bench_frag,$(BENCH_TARGETS)); do \
	    echo "== $$b"; sh bench/settle.sh $(SETTLE_STAMP); $$b || exit 1; done
	@echo "== bench/bench_knobs.sh"
	@sh bench/settle.sh $(SETTLE_STAMP)
	MAKE='$(MAKE)' sh bench/bench_knobs.sh $(BUILD)
else
bench:
	@echo "make bench: benchmarks run from the plain build only (drop SAN=$(SAN))" >&2; exit 1
endif
