"""tests/programs/python/adapters.py — a planted leak in a method (its qualified name is
Adapters.load_adapter from Python 3.11), and a balanced function that holds a fixed number of
blocks whatever it is asked."""
import ctypes
import sys


class Adapters:
    def __init__(self):
        self.loaded = []

    def load_adapter(self, acl, n, size):
        """Allocate n blocks and keep them; returns the line of the allocating call."""
        line = sys._getframe().f_lineno + 3
        for _ in range(n):
            p = ctypes.c_void_p()
            rc = acl.aclrtMalloc(ctypes.byref(p), size, 0)
            if rc != 0:
                raise RuntimeError(f"aclrtMalloc failed: {rc}")
            self.loaded.append(p.value)
        return line


ring = [None] * 4  # a scratch ring: at most 4 live blocks, whatever the number of calls


def balanced(acl, n, size):
    """Allocate n blocks, each replacing the oldest of the ring (freed first); returns the line."""
    line = sys._getframe().f_lineno + 6
    for i in range(n):
        slot = i % len(ring)
        if ring[slot] is not None:
            acl.aclrtFree(ring[slot])
        p = ctypes.c_void_p()
        rc = acl.aclrtMalloc(ctypes.byref(p), size, 0)
        if rc != 0:
            raise RuntimeError(f"aclrtMalloc failed: {rc}")
        ring[slot] = p.value
    return line
