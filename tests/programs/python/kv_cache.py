"""tests/programs/python/kv_cache.py — a planted leak: cache_kv() keeps every block it allocates."""
import ctypes
import sys

kept = []


def cache_kv(acl, n, size):
    """Allocate n blocks of size bytes and keep them; returns the line of the allocating call."""
    line = sys._getframe().f_lineno + 3
    for _ in range(n):
        p = ctypes.c_void_p()
        rc = acl.aclrtMalloc(ctypes.byref(p), size, 0)
        if rc != 0:
            raise RuntimeError(f"aclrtMalloc failed: {rc}")
        kept.append(p.value)
    return line
