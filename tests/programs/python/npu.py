"""tests/programs/python/npu.py — the ACL runtime through ctypes, the way a Python program without
a framework reaches it (shared by the Python test programs; knows nothing of npupool).

ctypes.CDLL releases the GIL around each call (like a torch operator); ctypes.PyDLL keeps it
(like a C extension that allocates with the GIL held).  The allocating calls themselves are made
in the callers' own files, so that the Python line of each call site is theirs.
"""
import ctypes
import os
import sys
import time

ACL_SUCCESS = 0


def load(kind):
    """The runtime, bound with ctypes.CDLL ("cdll") or ctypes.PyDLL ("pydll")."""
    cls = {"cdll": ctypes.CDLL, "pydll": ctypes.PyDLL}[kind]
    acl = cls("libascendcl.so")
    acl.aclrtMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]
    acl.aclrtFree.argtypes = [ctypes.c_void_p]
    return acl


def init(acl):
    rc = acl.aclInit(None)
    if rc != 100002:  # ACL_ERROR_REPEAT_INITIALIZE: a sitecustomize.py did it at start-up
        check(rc, "aclInit")
    check(acl.aclrtSetDevice(0), "aclrtSetDevice")


def check(rc, what):
    if rc != ACL_SUCCESS:
        sys.exit(f"{what} failed: {rc}")


def qualname(func):
    """The name npupool reports: co_qualname from 3.11, co_name before."""
    return func.__qualname__ if sys.version_info >= (3, 11) else func.__name__


def site(func, count, nbytes, line, file):
    """One expected leak site, for the case script."""
    print(f"SITE {qualname(func)} {count} {nbytes} {line} {os.path.abspath(file)}", flush=True)


def wait_for(path, seconds=20.0):
    """Wait until a report npupool writes from its own thread is there."""
    end = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > end:
            sys.exit(f"no report at {path}")
        time.sleep(0.01)
