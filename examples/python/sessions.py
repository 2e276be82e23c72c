"""examples/python/sessions.py — the demo service's session cache: it never evicts (the leak)."""
import ctypes


class SessionCache:
    def __init__(self, acl):
        self.acl = acl
        self.kv = {}

    def remember(self, session, nbytes):
        """Keep a KV block for the session.  Nothing ever removes it."""
        p = ctypes.c_void_p()
        if self.acl.aclrtMalloc(ctypes.byref(p), nbytes, 0) != 0:
            raise MemoryError(f"aclrtMalloc({nbytes}) failed")
        self.kv[session] = p.value
