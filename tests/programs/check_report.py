#!/usr/bin/env python3
"""tests/programs/check_report.py — validate npupool reports and check what they say.

Every report given is validated against docs/report-schema.json (python3-jsonschema) and checked
for internal consistency: allocated + free + overhead = reserved, fragmentation = 1 - largest/free,
largest_free = the largest free run of the free map, free/live map counts and bytes add up, buckets add up,
leaks sorted by bytes (largest first), per-device live figures = the sum of that device's leaks.

Usage:
  check_report.py [--schema PATH] REPORT...                      validate only
  check_report.py REPORT --trigger T                              and the trigger is T
  check_report.py REPORT --site FUNC:COUNT:BYTES[:LINE[:FILE]]... and these sites are listed
                         [--only]                                 (and nothing else)
  check_report.py REPORT --pysite QUALNAME:COUNT:BYTES:LINE:FILE... the same for sites named by
                         [--python-frames WORD]                   their first Python frame (file:
                                                                  the full path), captured with
                                                                  that python_frames word
Prints one line per problem and exits 1 if there was any.
"""
import argparse
import json
import os
import sys

try:
    import jsonschema
except ImportError:  # the case scripts skip when it is missing
    print("python3-jsonschema is not installed", file=sys.stderr)
    sys.exit(77)

problems = []


def problem(path, msg):
    problems.append(f"{path}: {msg}")


def consistency(path, doc):
    for d in doc["devices"]:
        where = f"{path}: devices[{d['device']}]"
        pool = d["pool"]
        leaks = [l for l in doc["leaks"] if l["device"] == d["device"]]
        if d["live_allocations"] != sum(l["count"] for l in leaks):
            problem(where, "live_allocations differs from the sum of its leaks' counts")
        if d["live_bytes"] != sum(l["bytes"] for l in leaks):
            problem(where, "live_bytes differs from the sum of its leaks' bytes")
        if pool is None:
            continue
        if pool["allocated_bytes"] + pool["free_bytes"] + pool["overhead_bytes"] != pool["reserved_bytes"]:
            problem(where, "allocated + free + overhead != reserved")
        want = 1 - pool["largest_free_bytes"] / pool["free_bytes"] if pool["free_bytes"] else 0.0
        if abs(pool["fragmentation"] - want) > 1e-9:
            problem(where, f"fragmentation {pool['fragmentation']} != 1 - largest/free = {want}")
        fm = d["free_map"]
        runs = [e for e in fm if len(e) == 2]  # [offset, size, 1] are free slots of a page
        if runs and max(e[1] for e in runs) != pool["largest_free_bytes"]:
            problem(where, "largest_free_bytes is not the largest free run of the free map")
        if any(len(e) == 3 and e[2] != 1 for e in fm):
            problem(where, "a free-map entry's third element is not 1 (free slots)")
        if len(fm) + d["free_map_omitted"] != pool["free_blocks"]:
            problem(where, "free map entries + omitted != free_blocks")
        if sum(e[1] for e in fm) + d["free_map_omitted_bytes"] != pool["free_bytes"]:
            problem(where, "free map bytes + omitted != free_bytes")
        lm = d["live_map"]
        if len(lm) + d["live_map_omitted"] != pool["live_blocks"]:
            problem(where, "live map entries + omitted != live_blocks")
        if sum(e[1] for e in lm) + d["live_map_omitted_bytes"] != pool["allocated_bytes"]:
            problem(where, "live map bytes + omitted != allocated_bytes")
        for name, m in (("free_map", fm), ("live_map", lm)):
            end = -1
            for e in m:
                if e[0] < end:
                    problem(where, f"{name} not in address order or overlapping at offset {e[0]}")
                end = e[0] + e[1]
                if name == "live_map" and len(e) == 3 and not 0 <= e[2] < len(doc["leaks"]):
                    problem(where, f"{name} names site {e[2]}, which is not in leaks")
        if sum(b["live_bytes"] for b in d["buckets"]) != pool["allocated_bytes"]:
            problem(where, "bucket live bytes do not add up to allocated_bytes")
        if sum(b["free_blocks"] for b in d["buckets"]) != pool["free_blocks"]:
            problem(where, "bucket free blocks do not add up to free_blocks")
        if pool["peak_allocated_bytes"] < pool["allocated_bytes"]:
            problem(where, "peak below allocated")
    sizes = [l["bytes"] for l in doc["leaks"]]
    if sizes != sorted(sizes, reverse=True):
        problem(path, "leaks are not sorted by bytes, largest first")


def frame0(leak):
    return leak["frames"][0] if leak["frames"] else {}


def pyframe0(leak):
    """The first (innermost) Python frame of a leak, {} when it has none."""
    return next((f for f in leak["frames"] if f.get("python")), {})


def check_pysites(path, doc, specs, words, seen):
    for spec in specs:
        func, count, nbytes, line, file = spec.split(":", 4)
        count, nbytes, line = int(count), int(nbytes), int(line)
        hits = [l for l in doc["leaks"]
                if pyframe0(l).get("function") == func and pyframe0(l).get("file") == file]
        if len(hits) != 1:
            problem(path, f"python site {func} ({file}): {len(hits)} leak entries, expected 1")
            continue
        l = hits[0]
        seen.add(id(l))
        f0 = pyframe0(l)
        if l["count"] != count or l["bytes"] != nbytes:
            problem(path, f"python site {func}: count {l['count']} bytes {l['bytes']}, expected {count} and {nbytes}")
        if f0.get("line") != line:
            problem(path, f"python site {func}: line {f0.get('line')}, expected {line}")
        if any(f0.get(k) is not None for k in ("module", "offset", "build_id", "address")):
            problem(path, f"python site {func}: a Python frame with native fields")
        if words and l.get("python_frames") not in words:
            problem(path, f"python site {func}: python_frames {l.get('python_frames')}, expected one of {words}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--schema", default=os.path.join(os.environ.get("ROOT", "."), "docs/report-schema.json"))
    ap.add_argument("--trigger")
    ap.add_argument("--site", action="append", default=[])
    ap.add_argument("--only", action="store_true")
    ap.add_argument("--pysite", action="append", default=[])
    ap.add_argument("--python-frames", action="append", default=[])
    a = ap.parse_args()
    with open(a.schema) as f:
        schema = json.load(f)
    validator = jsonschema.Draft202012Validator(schema)
    for path in a.reports:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            problem(path, f"cannot read: {e}")
            continue
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        for e in errors[:10]:
            problem(path, f"schema: {'/'.join(str(p) for p in e.path)}: {e.message}")
        if errors:
            continue
        consistency(path, doc)
        if a.trigger and doc["trigger"] != a.trigger:
            problem(path, f"trigger is {doc['trigger']}, expected {a.trigger}")
        seen = set()
        for spec in a.site:
            parts = spec.split(":")
            func, count, nbytes = parts[0], int(parts[1]), int(parts[2])
            line = int(parts[3]) if len(parts) > 3 and parts[3] else None
            file = parts[4] if len(parts) > 4 else None
            hits = [l for l in doc["leaks"] if frame0(l).get("function") == func]
            if len(hits) != 1:
                problem(path, f"site {func}: {len(hits)} leak entries, expected 1")
                continue
            l = hits[0]
            seen.add(id(l))
            f0 = frame0(l)
            if l["count"] != count or l["bytes"] != nbytes:
                problem(path, f"site {func}: count {l['count']} bytes {l['bytes']}, expected {count} and {nbytes}")
            if line is not None and f0.get("line") != line:
                problem(path, f"site {func}: line {f0.get('line')}, expected {line}")
            if file is not None and not (f0.get("file") or "").endswith(file):
                problem(path, f"site {func}: file {f0.get('file')}, expected ...{file}")
            if not f0.get("module") or not f0.get("build_id"):
                problem(path, f"site {func}: frame without module or build id")
        check_pysites(path, doc, a.pysite, a.python_frames, seen)
        if a.only:
            for l in doc["leaks"]:
                if id(l) not in seen:
                    problem(path, f"unexpected site {frame0(l).get('function')} ({l['count']} x, {l['bytes']} bytes)")
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
