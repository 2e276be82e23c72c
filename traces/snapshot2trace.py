#!/usr/bin/env python3
# traces/snapshot2trace.py — a PyTorch memory snapshot as an npupool allocation trace.
#
# Owns: reading the snapshot that torch.cuda.memory._snapshot() returns (pickled by
# _dump_snapshot(), or the same dict as JSON; torch_npu's torch.npu.memory._snapshot() has the
# same shape) and writing npupool-trace/1 (docs/trace.md) for `npupool replay`.
#
# The snapshot, as documented by torch/cuda/_memory_viz.py and memory_snapshot.cpp:
#   segments[]       the allocator's segments at the moment of the snapshot: device, address,
#                    total_size, is_expandable, blocks[] {address, size, requested_size, state}
#   device_traces[d] the last events of device d (a ring of max_entries): action, addr, size,
#                    stream, time_us (newer versions); actions alloc, free_requested,
#                    free_completed (free in older versions), segment_alloc, segment_free,
#                    segment_map, segment_unmap (expandable segments), oom, snapshot, ...
# Conversion:
#   alloc -> alloc of `size` bytes (the caching allocator's block: rounded to 512, what the pool
#   would be asked for by an allocator that forwards blocks); free_completed (or free, in traces
#   without free_completed: free_requested) -> free.  The ring may start in mid-run: a block
#   freed in the trace but never allocated there, or live at the snapshot and never seen, was
#   allocated before the trace began: it is allocated at time 0, before everything, so that the
#   live peak counts it.  An alloc of an address still live (a truncated or merged trace) frees
#   it first (counted).
#   PyTorch's reserved memory: the segments' total_size at the end, and back through the trace
#   the segment_alloc/map and segment_free/unmap events; its peak over the trace is written into
#   the header as pytorch_reserved_peak=N (with expandable=1 when any segment is expandable).
# Unpickling: a restricted unpickler that accepts plain Python data only (dict, list, str, int,
# float, bool, None, tuple): a snapshot that names any class is refused, so a hostile file cannot
# run code.
#
# Usage: snapshot2trace.py SNAPSHOT [-o OUT] [--device D] [--compare NPUPOOL]
#   --compare NPUPOOL  also replay the trace with that npupool binary and print one line:
#                      live peak, PyTorch's reserved peak, and the smallest pools of npupool's
#                      vmm and block pools and of first fit, each over the live peak.
# Exit: 0, 2 bad input (one line on stderr).
import argparse
import io
import json
import pickle
import re
import subprocess
import sys


class _DataOnly(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(
            "the snapshot names %s.%s: only plain data is read" % (module, name))


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    head = raw.lstrip()[:1]
    if head in (b"{", b"["):
        return json.loads(raw.decode("utf-8"))
    return _DataOnly(io.BytesIO(raw)).load()


def convert(snap, device=None):
    """Returns (lines, info) for one device (the first with events when device is None)."""
    if not isinstance(snap, dict) or "device_traces" not in snap:
        raise ValueError("not a memory snapshot: no device_traces")
    traces = snap["device_traces"]
    devs = [d for d in range(len(traces)) if traces[d]] if device is None else [device]
    if not devs or devs[0] >= len(traces):
        raise ValueError("no device with events")
    dev = devs[0]
    ev = traces[dev]
    actions = {e.get("action") for e in ev}
    free_action = "free_completed" if "free_completed" in actions else (
        "free" if "free" in actions else "free_requested")
    segs = [s for s in snap.get("segments", []) if s.get("device", dev) == dev]

    live = {}          # addr -> size, inside the trace
    early = {}         # addr -> size: allocated before the trace began
    seen = set()
    out = []
    resets = 0
    for i, e in enumerate(ev):
        a, addr, size = e.get("action"), e.get("addr"), e.get("size", 0)
        t = int(e.get("time_us", i) * 1000) if "time_us" in e else i
        if a == "alloc":
            if addr in live:
                out.append((t, "free", addr, live.pop(addr)))
                resets += 1
            live[addr] = size
            seen.add(addr)
            out.append((t, "alloc", addr, size))
        elif a == free_action:
            if addr in live:
                out.append((t, "free", addr, live.pop(addr)))
            elif addr not in seen and addr not in early:
                early[addr] = size
                out.append((t, "free", addr, size))
            seen.add(addr)
    for s in segs:
        for b in s.get("blocks", []):
            if str(b.get("state", "")).startswith("active") and b["address"] not in seen:
                early.setdefault(b["address"], b["size"])

    # PyTorch's reserved bytes over the trace, from the end backwards.
    reserved_end = sum(s.get("total_size", 0) for s in segs)
    delta = 0
    steps = []
    for e in ev:
        a, size = e.get("action"), e.get("size", 0)
        if a in ("segment_alloc", "segment_map"):
            delta += size
            steps.append(size)
        elif a in ("segment_free", "segment_unmap"):
            delta -= size
            steps.append(-size)
    reserved = reserved_end - delta
    peak = reserved
    for s in steps:
        reserved += s
        peak = max(peak, reserved)

    lines = ["1,0,alloc,0x%x,%d,%d" % (addr, size, dev) for addr, size in sorted(early.items())]
    lines += ["1,%d,%s,0x%x,%s,%d" % (t, a, addr, size if a == "alloc" else "", dev)
              for t, a, addr, size in out]
    info = {
        "device": dev,
        "events": len(ev),
        "early": len(early),
        "resets": resets,
        "pytorch_reserved_peak": peak,
        "expandable": int(any(s.get("is_expandable") for s in segs)),
    }
    return lines, info


def write(path, lines, info, source):
    hdr = "# npupool-trace/1 generator=snapshot2trace source=%s device=%d pytorch_reserved_peak=%d " \
          "expandable=%d" % (re.sub(r"\s", "_", source), info["device"],
                             info["pytorch_reserved_peak"], info["expandable"])
    text = hdr + "\nthread,time_ns,action,pointer,size,device\n" + "\n".join(lines) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)


def min_pool(npupool, trace, *args):
    r = subprocess.run([npupool, "replay", trace, "--rounding", "none", "--no-timing",
                        "--min-pool", "--verify", "20", *args],
                       capture_output=True, text=True, check=True)
    m = re.search(r"device \d+: .* \((\d+) bytes\); live peak .* \((\d+) bytes\)", r.stdout)
    if not m:
        raise ValueError("npupool replay printed no minimum pool:\n" + r.stdout + r.stderr)
    return int(m.group(1)), int(m.group(2))


def main():
    ap = argparse.ArgumentParser(description="PyTorch memory snapshot -> npupool trace")
    ap.add_argument("snapshot")
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--device", type=int, default=None)
    ap.add_argument("--compare", metavar="NPUPOOL")
    a = ap.parse_args()
    try:
        lines, info = convert(load(a.snapshot), a.device)
    except (OSError, ValueError, KeyError, TypeError, pickle.UnpicklingError, EOFError) as e:
        print("snapshot2trace: %s: %s" % (a.snapshot, e), file=sys.stderr)
        return 2
    write(a.output, lines, info, a.snapshot)
    print("snapshot2trace: %s: device %d, %d events, %d allocations from before the trace, "
          "%d re-allocations of a live address; PyTorch reserved at most %d bytes%s"
          % (a.snapshot, info["device"], info["events"], info["early"], info["resets"],
             info["pytorch_reserved_peak"],
             " (expandable segments)" if info["expandable"] else ""), file=sys.stderr)
    if a.compare:
        if a.output == "-":
            print("snapshot2trace: --compare needs -o FILE", file=sys.stderr)
            return 2
        vmm, peak = min_pool(a.compare, a.output)
        block, _ = min_pool(a.compare, a.output, "--backing", "block")
        ff, _ = min_pool(a.compare, a.output, "--backing", "block", "--allocator", "firstfit")
        pt = info["pytorch_reserved_peak"]
        print("live_peak=%d pytorch_reserved=%d (%.4fx) npupool_vmm=%d (%.4fx) "
              "npupool_block=%d (%.4fx) firstfit=%d (%.4fx)"
              % (peak, pt, pt / peak, vmm, vmm / peak, block, block / peak, ff, ff / peak))
    return 0


if __name__ == "__main__":
    sys.exit(main())
