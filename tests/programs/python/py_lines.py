"""tests/programs/python/py_lines.py — the interpreter's own answer to "which line is this
instruction on", for every code object of some standard-library modules, as input for
py_lines_check (tests/cases/python_layout.sh).

One line per code object:  FORMAT FIRSTLINENO TABLE_HEX OFFSET:LINE,OFFSET:LINE,...
  FORMAT 0 = co_lnotab (3.9), 1 = the 3.10 co_linetable, 2 = PEP 657 locations (3.11+);
  LINE -1 = no line.  Truth: code.co_lines() from 3.10, dis.findlinestarts() on 3.9.
"""
import dis
import importlib
import sys
import types

MODULES = ["argparse", "json.decoder", "dis", "inspect", "typing", "email.message", "ast",
           "difflib", "threading", "tokenize", "pathlib", "asyncio.base_events"]


def codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from codes(c)


def expected(co):
    if sys.version_info >= (3, 10):
        for start, end, line in co.co_lines():
            for off in range(start, end, 2):
                yield off, -1 if line is None else line
        return
    starts = list(dis.findlinestarts(co))
    for off in range(0, len(co.co_code), 2):
        line = co.co_firstlineno
        for s, l in starts:
            if s > off:
                break
            line = l
        yield off, line


def main():
    minor = sys.version_info[1]
    fmt = 0 if minor == 9 else 1 if minor == 10 else 2
    n = 0
    for name in MODULES:
        mod = importlib.import_module(name)
        path = mod.__spec__.origin
        with open(path, "rb") as f:
            top = compile(f.read(), path, "exec")
        for co in codes(top):
            table = co.co_lnotab if minor == 9 else co.co_linetable
            pairs = ",".join(f"{o}:{l}" for o, l in expected(co))
            print(f"{fmt} {co.co_firstlineno} {table.hex() or '-'} {pairs or '-'}")
            n += 1
    print(f"# {n} code objects", file=sys.stderr)


if __name__ == "__main__":
    main()
