# variants: plain asan tsan
# fork() while 4 threads allocate: no child deadlocks (timeout) or fails — with the runtime
# linked normally, and dlopen()ed after start-up (its fork handlers registered after npupool's).
. "$ROOT/tests/lib.sh"
export FAKEACL_STATS="$TMPDIR_CASE/stats-%p"
# small devices: the point is lock order, and sanitizers pay for every byte mapped and unmapped
export FAKEACL_HBM_BYTES=2G
cd "$TMPDIR_CASE"
# Under qemu-user (make test-aarch64) each fork of the threaded program stops every emulated
# thread first: the same run takes from 30 s to minutes there.
tmo=120
[ -z "$EMU" ] || tmo=300
# Under ASan with block pools only: GCC's libasan does not lock its allocator around fork(), so a
# child whose parent had a thread inside malloc() can deadlock in its first malloc (seen: a child
# stuck in __asan::Allocator::Allocate, from npupool building a pool and from glibc's dlsym error
# path).  The fake runtime takes its records from mmap for this reason, but a vmm pool built in
# the child still allocates host memory for its plans; block pools keep the exposure this case
# had before them (fork_dlopen under ASan hung at times then too).  Plain and TSan, whose
# allocators are locked around fork, cover vmm pools.  In the ASan build fork_threads' threads
# also pause around each fork (tests/programs/fork_threads.c): its child builds a pool, with
# malloc, and hung about one run in three once thread caches were in.
vmm_env=; [ "$VARIANT" = asan ] && vmm_env=NPUPOOL_VMM=0
timeout $tmo env $vmm_env bash -c 'launch "$@"' launch "${SANRT:+$SANRT }$SHIM" "$PROGS/fork_threads"
rc=$?
[ "$rc" -eq 124 ] && fail "fork_threads hung (deadlock after fork?)"
[ "$rc" -eq 0 ] || fail "fork_threads failed with status $rc"
# Not under TSan: its runtime takes loader locks of its own around fork() in a process whose
# threads keep running, and a child of this program then waits forever in dl_iterate_phdr
# (TSan documents fork of a multi-threaded program as unsupported).
[ "$VARIANT" = tsan ] && exit 0
# Not under ASan either: its rebuild thread and the runtime's own threads call malloc() without
# pause, and GCC 12's libasan does not lock its allocator around fork() (above): the child then
# hangs at its first malloc about one run in five.  The plain build covers it.
[ "$VARIANT" = asan ] && exit 0
no_emu "fork_dlopen's rebuild thread maps and unmaps a 1.6 GiB reservation thousands of times, and qemu-user's memory grows with each (15 GiB, then the OOM killer)"
timeout $tmo env $vmm_env bash -c 'launch "$@"' launch "${SANRT:+$SANRT }$SHIM" "$PROGS/fork_dlopen"
rc=$?
[ "$rc" -eq 124 ] && fail "fork_dlopen hung (lock order between fork handlers?)"
[ "$rc" -eq 0 ] || fail "fork_dlopen failed with status $rc"
exit 0
