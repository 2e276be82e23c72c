"""tests/programs/python/py_leaks.py — a Python program with planted device-memory leaks, run in
front of npupool by tests/cases/python_*.sh (it knows nothing of npupool).

Usage: py_leaks.py SCENARIO DLL [ARGS]      DLL = cdll | pydll (how the runtime is called)
  leaks SCALE [kill DIR]
                      cache_kv() and Adapters.load_adapter() leak (in two files), balanced() is
                      busy but frees everything; prints SITE lines (qualname count bytes line file)
                      and "CALLS allocs frees" (what reached aclrtMalloc / aclrtFree), then
                      "MEMINFO free total" (aclrtGetMemInfo of HBM, leaks still live).  With
                      "kill DIR": then a report (SIGUSR2, waits for DIR/r-1.json) and SIGKILL
  intervals DIR       three phases, each ended by SIGUSR2 and a wait for DIR/r-<n>.json:
                      balanced; balanced + cache_kv(2); balanced.  Prints SITE lines.
  threads             cache_kv from a threading.Thread and from a C thread (pyhelper)
  callback            C (pyhelper_call) calls back into Python, which allocates
  errors              allocations while an exception is handled and while one is pending in C
  lifecycle           allocations in an atexit handler (CDLL), in __del__ while the interpreter
                      finalizes (CDLL and PyDLL), from a daemon thread still allocating at exit,
                      and in a sub-interpreter (PyDLL); with $PYTHONPATH holding the case's
                      sitecustomize.py, also at start-up.  Prints one JSON line per planted site
                      ({"function", "line", "phase", "dll"}) as it goes
  names DIR           runs leak(acl) of every DIR/*.py (non-ASCII and undecodable file names,
                      non-ASCII function names; written by the case script) and prints, per
                      module, {"function", "file", "line"} as npupool should name the site
                      (a code point that is no Unicode scalar, e.g. a surrogate, as U+FFFD)
"""
import ctypes
import importlib.util
import json
import os
import signal
import sys
import threading

import adapters
import kv_cache
import npu

MIB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def helper(kind):
    lib = os.environ.get("PYHELPER", "libpyhelper.so")
    return (ctypes.PyDLL if kind == "pydll" else ctypes.CDLL)(lib)


def scenario_leaks(acl, scale):
    adapters.balanced(acl, 200 * scale, 64 * 1024)
    line_kv = kv_cache.cache_kv(acl, 3 * scale, MIB)
    adapters.balanced(acl, 100 * scale, 64 * 1024)
    store = adapters.Adapters()
    line_ad = store.load_adapter(acl, 2 * scale, 768 * 1024)
    adapters.balanced(acl, 100 * scale, 64 * 1024)
    for i, p in enumerate(adapters.ring):  # balanced() keeps nothing at the end
        acl.aclrtFree(p)
        adapters.ring[i] = None
    npu.site(kv_cache.cache_kv, 3 * scale, 3 * scale * MIB, line_kv, kv_cache.__file__)
    npu.site(adapters.Adapters.load_adapter, 2 * scale, 2 * scale * 768 * 1024, line_ad,
             adapters.__file__)
    allocs = 400 * scale + 3 * scale + 2 * scale
    print(f"CALLS {allocs} {400 * scale}", flush=True)
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    npu.check(acl.aclrtGetMemInfo(1, ctypes.byref(free), ctypes.byref(total)), "aclrtGetMemInfo")
    print(f"MEMINFO {free.value} {total.value}", flush=True)  # 1 = ACL_HBM_MEM


def scenario_intervals(acl, directory):
    def report(n):
        os.kill(os.getpid(), signal.SIGUSR2)
        npu.wait_for(os.path.join(directory, f"r-{n}.json"))

    for phase in (1, 2, 3):  # one call site of balanced() for all phases
        line_b = adapters.balanced(acl, 50, 4096)
        if phase == 2:
            line_kv = kv_cache.cache_kv(acl, 2, MIB)
        report(phase)
    npu.site(adapters.balanced, 4, 4 * 4096, line_b, adapters.__file__)
    npu.site(kv_cache.cache_kv, 2, 2 * MIB, line_kv, kv_cache.__file__)


def scenario_threads(acl, kind):
    lines = []

    def worker():
        npu.check(acl.aclrtSetDevice(0), "aclrtSetDevice")  # a new thread has no device yet
        lines.append(kv_cache.cache_kv(acl, 2, MIB))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    npu.site(kv_cache.cache_kv, 2, 2 * MIB, lines[0], kv_cache.__file__)
    npu.check(helper("cdll").pyhelper_thread_alloc(ctypes.c_size_t(3 * MIB), 1), "C thread")
    print(f"CTHREAD 1 {3 * MIB}", flush=True)


def scenario_callback(acl, kind):
    lines = []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)
    def on_call(n):
        lines.append(kv_cache.cache_kv(acl, n, MIB))
        return 0

    npu.check(helper(kind).pyhelper_call(on_call, 2), "pyhelper_call")
    npu.site(kv_cache.cache_kv, 2, 2 * MIB, lines[0], kv_cache.__file__)
    print(f"CALLER {sys._getframe().f_code.co_name}", flush=True)


def scenario_errors(acl, kind):
    try:
        raise KeyError("outer")
    except KeyError as e:
        p = ctypes.c_void_p()
        npu.check(acl.aclrtMalloc(ctypes.byref(p), 4096, 0), "aclrtMalloc")
        if sys.exc_info()[1] is not e:
            sys.exit("the exception being handled changed during an allocation")
        npu.check(acl.aclrtFree(p), "aclrtFree")
        if sys.exc_info()[1] is not e:
            sys.exit("the exception being handled changed during a free")
    api = ctypes.pythonapi
    h = helper("pydll")  # the GIL held: it calls the C API
    h.pyhelper_alloc_with_error.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_size_t]
    try:
        h.pyhelper_alloc_with_error(ctypes.cast(api.PyErr_SetString, ctypes.c_void_p),
                                    ctypes.cast(api.PyErr_Occurred, ctypes.c_void_p),
                                    ctypes.c_void_p(id(ValueError)), 4096)
    except ValueError as e:
        if str(e) != "pending from C":
            sys.exit(f"pending exception: {e}")
    else:
        sys.exit("the exception set in C before the allocation was lost")
    print("ERRORS ok", flush=True)


def scenario_names(acl, directory):
    for i, entry in enumerate(sorted(os.listdir(directory))):
        if not entry.endswith(".py"):
            continue
        spec = importlib.util.spec_from_file_location(f"names{i}", os.path.join(directory, entry))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        line = mod.leak(acl)
        code = mod.leak_function.__code__
        file = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in code.co_filename)
        print(json.dumps({"function": npu.qualname(mod.leak_function), "file": file, "line": line}),
              flush=True)


class Finalizer:
    """Allocates in __del__, run by the collection of the interpreter's finalization."""

    def __init__(self, acl, pyacl):
        # module globals may be None by the time __del__ runs: keep what it needs
        self.acl, self.pyacl, self.c_void_p, self.byref = acl, pyacl, ctypes.c_void_p, ctypes.byref
        self.write, self.dumps, self.getframe = os.write, json.dumps, sys._getframe

    def __del__(self):
        for dll, lib in (("cdll", self.acl), ("pydll", self.pyacl)):
            p = self.c_void_p()
            line = self.getframe().f_lineno + 1
            lib.aclrtMalloc(self.byref(p), 1 << 20, 0)
            self.write(1, (self.dumps({"function": "Finalizer.__del__", "line": line,
                                       "phase": "finalize", "dll": dll}) + "\n").encode())


def at_exit(acl):
    p = ctypes.c_void_p()
    line = sys._getframe().f_lineno + 1
    acl.aclrtMalloc(ctypes.byref(p), 1 << 20, 0)
    print(json.dumps({"function": "at_exit", "line": line, "phase": "atexit", "dll": "cdll"}),
          flush=True)


def daemon(acl):
    acl.aclrtSetDevice(0)
    while True:  # until the interpreter stops it at exit
        p = ctypes.c_void_p()
        if acl.aclrtMalloc(ctypes.byref(p), 4096, 0) == 0:
            acl.aclrtFree(p)


SUBINTERPRETER = """
import ctypes
acl = ctypes.PyDLL("libascendcl.so")
acl.aclrtMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]


def sub_leak():
    p = ctypes.c_void_p()
    acl.aclrtMalloc(ctypes.byref(p), 1 << 20, 0)


sub_leak()
"""


def scenario_lifecycle(acl, kind):
    import atexit
    atexit.register(at_exit, acl)
    threading.Thread(target=daemon, args=(acl,), daemon=True).start()
    try:
        import _xxsubinterpreters as interpreters  # 3.9 .. 3.12
    except ImportError:
        try:
            import _interpreters as interpreters  # 3.13
        except ImportError:
            interpreters = None
    if interpreters is not None:
        if hasattr(interpreters, "new_config"):  # 3.13: a legacy one, where ctypes loads
            iid = interpreters.create(interpreters.new_config("legacy"))
        else:
            try:
                iid = interpreters.create(isolated=False)  # 3.12: ctypes is a legacy module
            except TypeError:
                iid = interpreters.create()
        interpreters.run_string(iid, SUBINTERPRETER)
        interpreters.destroy(iid)
        print(json.dumps({"function": "sub_leak", "line": 9, "phase": "subinterpreter",
                          "dll": "pydll"}), flush=True)
    import gc
    gc.disable()  # the cycle stays until the collection the interpreter runs while finalizing
    f = Finalizer(acl, npu.load("pydll"))
    f.cycle = f


def main():
    scenario, kind = sys.argv[1], sys.argv[2]
    acl = npu.load(kind)
    npu.init(acl)
    if scenario == "leaks":
        scenario_leaks(acl, int(sys.argv[3]) if len(sys.argv) > 3 else 1)
        if len(sys.argv) > 5 and sys.argv[4] == "kill":  # what only a ledger file outlives
            os.kill(os.getpid(), signal.SIGUSR2)
            npu.wait_for(os.path.join(sys.argv[5], "r-1.json"))
            os.kill(os.getpid(), signal.SIGKILL)
    elif scenario == "intervals":
        scenario_intervals(acl, sys.argv[3])
    elif scenario == "threads":
        scenario_threads(acl, kind)
    elif scenario == "callback":
        scenario_callback(acl, kind)
    elif scenario == "errors":
        scenario_errors(acl, kind)
    elif scenario == "lifecycle":
        scenario_lifecycle(acl, kind)
    elif scenario == "names":
        scenario_names(acl, sys.argv[3])
    else:
        sys.exit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main()
