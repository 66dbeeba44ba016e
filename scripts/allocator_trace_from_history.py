#!/usr/bin/env python3
"""Writes the allocations and frees of a recorded PyTorch allocator history as a plain trace that
trainplan's allocator simulation can replay (tests/planner/allocator/test_caching_allocator_history.cpp does): the
test of the simulation itself, apart from the inventory that drives it in `plan`.

    python3 scripts/allocator_trace_from_history.py HISTORY.pickle TRACE

HISTORY is what collect_hf.py --memory-history writes for a run (torch.cuda.memory._dump_snapshot), as
ID.pickle or ID.pickle.xz. Only
the Python standard library is needed. TRACE has one line an event, in the order the allocator saw them:

    # pytorch-history <source> segments <N> reserved <bytes>
    a <id> <bytes>      an allocation of <bytes> as requested (the allocator rounds it)
    f <id>              its free (free_completed: the block is back in the pool)
    s <bytes>           PyTorch made a segment (a cudaMalloc) of <bytes> for the allocation that follows

Block ids number the allocations from 0; an address PyTorch reuses gets a new id. The header's figures are
PyTorch's: the segments it made and their bytes (it released none). A history whose device_traces do not start before the model was created
(the oldest events dropped past max_entries) is refused: its frees would name blocks it never allocated.
"""
import lzma
import os
import pickle
import sys

import allocator_history


def main():
    if len(sys.argv) != 3:
        print("usage: allocator_trace_from_history.py HISTORY.pickle TRACE", file=sys.stderr)
        return 2
    try:
        history = allocator_history.load(sys.argv[1])
        events = history["device_traces"][0]
    except (OSError, lzma.LZMAError, pickle.UnpicklingError, KeyError, IndexError, EOFError, TypeError) as e:
        print(f"allocator_trace_from_history: {sys.argv[1]}: not a recorded allocator history ({e})", file=sys.stderr)
        return 2
    lines, live, next_id = [], {}, 0
    segments = reserved = 0
    for e in events:
        action = e["action"]
        if action == "segment_alloc":
            segments += 1
            reserved += e["size"]
            lines.append(f"s {e['size']}")
        elif action in ("segment_free", "segment_map", "segment_unmap"):
            print(f"allocator_trace_from_history: {sys.argv[1]} has a {action} (a released segment, or expandable "
                  "segments): the trace format has no event for it", file=sys.stderr)
            return 2
        elif action == "alloc":
            live[e["addr"]] = (next_id, e["size"])
            lines.append(f"a {next_id} {e['size']}")
            next_id += 1
        elif action == "free_completed":
            if e["addr"] not in live:
                print(f"allocator_trace_from_history: {sys.argv[1]} frees a block it never allocated: the history "
                      "does not start before the model was created", file=sys.stderr)
                return 2
            block_id, _ = live.pop(e["addr"])
            lines.append(f"f {block_id}")
    header = f"# pytorch-history {os.path.basename(sys.argv[1])} segments {segments} reserved {reserved}"
    with open(sys.argv[2], "w") as out:
        out.write(header + "\n" + "\n".join(lines) + "\n")
    print(header)
    return 0


if __name__ == "__main__":
    sys.exit(main())
