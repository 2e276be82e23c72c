# bench/peers/peers.mk — the allocators bench_peers compares npupool's pool with (bench/peers/,
# docs/bench.md), the benchmark itself and the peers' unit test.
#   $(BUILD)/bench/bench_peers             `make bench`: latency and fragmentation tables
#   $(BUILD)/tests/unit/test_bench_peers   cmocka: random sequences through every arena peer
# The peers are built in every build (their unit test runs under ASan and TSan too); the
# benchmark, like every benchmark, in the plain build only.  Third-party allocators are
# dlopen()ed at run time: nothing links them, and `make bench` offers them (mk/deps.sh bench:
# installed as root on Debian, else named and skipped).

PEERS_INC  := $(BASE_INC) -Ibench/peers
PEERS_SRCS := bench/peers/pblock.c bench/peers/peer_tlsf.c bench/peers/peer_o1heap.c \
              bench/peers/peer_bestfit.c bench/peers/peer_floor.c bench/peers/peer_host.c
PEERS_OBJS := $(PEERS_SRCS:%.c=$(BUILD)/obj/%.o)
$(BUILD)/obj/bench/peers/%.o: INC := $(PEERS_INC) -Itools

PEERS_TEST := $(BUILD)/tests/unit/test_bench_peers
$(BUILD)/obj/tests/unit/test_bench_peers.o: INC := $(PEERS_INC)
$(PEERS_TEST): $(BUILD)/obj/tests/unit/test_bench_peers.o $(PEERS_OBJS) $(BASE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka -ldl -lm
UNIT_TESTS += $(PEERS_TEST)

ifeq ($(SAN),)
# The rmm trace is read with the CLI's own reader (tools/trace_read.c and what it needs).
$(BUILD)/obj/bench/bench_peers.o: INC := $(POOL_INC) $(PEERS_INC) -Itools
$(BUILD)/bench/bench_peers: $(BUILD)/obj/bench/bench_peers.o $(BUILD)/obj/bench/peers/ptimer.o \
                            $(BUILD)/obj/bench/peers/ptrace.o $(PEERS_OBJS) \
                            $(BUILD)/obj/tools/firstfit.o $(BUILD)/obj/tools/trace_read.o \
                            $(BUILD)/obj/tools/input.o $(BUILD)/obj/tools/tools.o $(POOL_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcjson -ldl -lm

BENCH_TARGETS += $(BUILD)/bench/bench_peers

# The optional allocators, probed (and installed as root) before the benchmarks run.
.PHONY: bench-deps
bench: bench-deps
bench-deps:
	@$(DEPS_ENV) sh mk/deps.sh bench
endif
