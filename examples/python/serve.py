"""examples/python/serve.py — a small Python inference service on the ACL runtime, for `make demo`.

It reaches the runtime through ctypes.CDLL, which releases the GIL around each call as a
torch_npu operator does.  Each request allocates activations and frees them again; the session
cache (sessions.py) forgets to evict: a leak.  The program knows nothing of npupool.
Usage: serve.py [requests]
"""
import ctypes
import sys
import time

import sessions

ACL = ctypes.CDLL("libascendcl.so")
ACL.aclrtMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]
ACL.aclrtFree.argtypes = [ctypes.c_void_p]


def device_alloc(nbytes):
    p = ctypes.c_void_p()
    if ACL.aclrtMalloc(ctypes.byref(p), nbytes, 0) != 0:
        raise MemoryError(f"aclrtMalloc({nbytes}) failed")
    return p.value


def forward(tokens):
    """One request: activations for each layer, freed at the end."""
    acts = [device_alloc(tokens * 4096) for _ in range(8)]
    for a in acts:
        ACL.aclrtFree(a)


def main():
    requests = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    ACL.aclInit(None)
    ACL.aclrtSetDevice(0)
    cache = sessions.SessionCache(ACL)
    start = time.monotonic()
    for i in range(requests):
        forward(64 + i % 512)
        if i % 50 == 0:  # a new session every 50 requests
            cache.remember(f"session-{i}", 2 << 20)
    print(f"serve.py: {requests} requests in {1000 * (time.monotonic() - start):.0f} ms, "
          f"{len(cache.kv)} sessions cached")
    ACL.aclFinalize()


if __name__ == "__main__":
    main()
