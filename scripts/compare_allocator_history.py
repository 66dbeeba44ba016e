#!/usr/bin/env python3
"""Sets the segments PyTorch's caching allocator made in a measured run beside those trainplan's allocator
replay makes for the same configuration, in the order each made them: where the replay's reserved bytes
part from the measurement (S5 and S10 of the shared measurements), the first segment one makes and the other does not.

    python3 scripts/collect_hf.py --preset shared-h100 --memory-history history -o runs.jsonl   # on a GPU
    plan check runs.jsonl --segments-out replay.jsonl
    python3 scripts/compare_allocator_history.py history replay.jsonl [--id S5]

HISTORY is one ID.pickle or ID.pickle.xz (torch.cuda.memory._dump_snapshot, which collect_hf.py --memory-history writes
for each run) or a folder of them; REPLAY is what `plan check --segments-out` wrote. Only the Python
standard library is needed: the pickle holds dicts and lists.

PyTorch's side: every "segment_alloc" of the recorded history (one cudaMalloc), with its step and phase:
the label collect_hf.py attaches to the events of each phase ("step 2 backward", with
torch.cuda.memory._set_memory_metadata), or where a history has none, the phase its Python stack says:
"creation" (nn.Module._apply: model.to), "optimizer" (torch/optim), "backward" (no Python frame: the
autograd engine's device thread; a checkpointed layer's recomputation runs Python and reads as
"recompute"), otherwise "forward", with a forward after an optimizer step starting the next step. (Stacks
are there only when the history recorded them; collect_hf.py records none, to keep its step times.) A segment of exactly 2 MiB is the small pool's (large-pool segments are 20 MiB or at
least 10 MiB). The two lists are aligned by segment size (difflib), and each stretch where they differ is
printed with its step and phase (PyTorch) or the buffer whose allocation made it (the replay). PyTorch's
cuBLAS workspaces (32 MiB each on an H100, one for the forward's thread and one for autograd's) come
through the same allocator and are not among the replay's segments (trainplan adds them to the device peak
apart): a 32 MiB segment in PyTorch's list alone, near a step's first matrix product, is most likely one.

The history must be recorded from before the model is created (collect_hf.py does) and hold every event:
torch keeps the last max_entries (collect_hf.py asks for 1,000,000), so a longer run loses its first ones.

Exit status: 0 when every run compared has the same segments in the same order, 1 when some differ,
2 for a missing or unreadable input.
"""
import argparse
import difflib
import json
import lzma
import os
import pickle
import sys

import allocator_history

MIB = 1 << 20
SMALL_SEGMENT = 2 * MIB  # kSmallBuffer


def fail(message):
    print("compare_allocator_history: " + message, file=sys.stderr)
    sys.exit(2)


def size_text(n):
    return "{} MiB".format(n // MIB) if n % MIB == 0 else "{:.2f} MiB".format(n / MIB)


def phase_of(frames):
    names = [(f.get("filename", ""), f.get("name", "")) for f in frames or []]
    if not names:
        return "backward"
    if any("/optim/" in path for path, _ in names):
        return "optimizer"
    if any(name == "_apply" for _, name in names):
        return "creation"
    if any(path.endswith("utils/checkpoint.py") and "unpack" in name for path, name in names):
        return "recompute"
    return "forward"


def labelled(entry):
    """(step, phase) from the label collect_hf.py attached ("creation", "step 2 backward"), or None."""
    words = str(entry.get("user_metadata") or "").split()
    if words == ["creation"]:
        return 0, "creation"
    if len(words) == 3 and words[0] == "step" and words[1].isdigit():
        return int(words[1]), words[2]
    return None


def pytorch_segments(history):
    """[(bytes, 'small'|'large', step, phase)] in the order of the recorded history (device 0): each entry's
    step and phase from collect_hf.py's label where it has one, else guessed from its Python stack."""
    traces = history.get("device_traces") or [[]]
    out, step, last = [], 0, "creation"
    for entry in traces[0]:
        label = labelled(entry)
        if label is not None:
            step, last = label
            if entry.get("action") == "segment_alloc":
                size = int(entry["size"])
                out.append((size, "small" if size == SMALL_SEGMENT else "large", step, last))
            continue
        phase = phase_of(entry.get("frames"))
        if phase == "forward" and last in ("creation", "optimizer"):
            step += 1  # the next training step's forward
        if phase != "backward" or last != "creation":
            last = phase
        if entry.get("action") == "segment_alloc":
            size = int(entry["size"])
            out.append((size, "small" if size == SMALL_SEGMENT else "large", step, "creation" if step == 0 else phase))
    return out


def read_replay(path):
    runs = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                seg = json.loads(line)
                runs.setdefault(seg["id"], []).append((int(seg["bytes"]), seg["pool"], int(seg["step"]), seg["tensor"]))
            except (ValueError, KeyError, TypeError) as e:
                fail("{} line {}: not a segment line of plan check --segments-out ({})".format(path, number, e))
    return runs


def histories(path):
    """{run id: history path} (ID.pickle or ID.pickle.xz)"""
    if os.path.isdir(path):
        return {allocator_history.run_id(name): os.path.join(path, name)
                for name in sorted(os.listdir(path)) if allocator_history.is_history(name)}
    if os.path.isfile(path):
        return {allocator_history.run_id(path): path}
    fail("no such file or folder: {}".format(path))


def span(first, end):
    """1-based segment numbers of the half-open [first, end)."""
    return "segment {}".format(end) if end == first + 1 else "segments {}-{}".format(first + 1, end)


def step_text(step):
    return "creation" if step == 0 else "step {}".format(step)


def summary(label, segments):
    """Count and bytes of (bytes, pool, step, ...) segments, in all and by step."""
    total = sum(s[0] for s in segments)
    by_step = {}
    for s in segments:
        n, b = by_step.get(s[2], (0, 0))
        by_step[s[2]] = (n + 1, b + s[0])
    if not segments:
        return "{} no segments".format(label)
    steps = ", ".join("{}: {} ({:.2f} GiB)".format(step_text(k), n, b / (1 << 30)) for k, (n, b) in sorted(by_step.items()))
    return "{} {} segments, {:.2f} GiB: {}".format(label, len(segments), total / (1 << 30), steps)


def compare(run_id, measured, replayed, limit, lines):
    """Prints the comparison; True when the two lists are the same sizes in the same order."""
    print("{}:".format(run_id))
    print("  " + summary("PyTorch", measured) +
          ("" if measured else " (the history has no segment_alloc: recorded from the model's creation on?)"))
    print("  " + summary("replay ", replayed))
    a = [(s[0], s[1]) for s in measured]
    b = [(s[0], s[1]) for s in replayed]
    blocks = [op for op in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not blocks:
        print("  the same segments in the same order")
        return True
    for tag, i1, i2, j1, j2 in blocks[:limit]:
        if i2 > i1 and j2 > j1:
            print("  PyTorch's {} where the replay made its {}:".format(span(i1, i2), span(j1, j2)))
        elif i2 > i1:
            print("  PyTorch's {}, which the replay does not make (after its {}):".format(span(i1, i2), j1))
        else:
            print("  the replay's {}, which PyTorch did not make (after its {}):".format(span(j1, j2), i1))
        for who, stretch in (("PyTorch", measured[i1:i2]), ("replay ", replayed[j1:j2])):
            for size, pool, step, what in stretch[:lines]:
                print("    {} {:>10} {:<5} {} {}".format(who, size_text(size), pool, step_text(step), what))
            if len(stretch) > lines:
                print("    {} and {} more ({:.2f} GiB in all)".format(who, len(stretch) - lines,
                                                                   sum(s[0] for s in stretch) / (1 << 30)))
    if len(blocks) > limit:
        print("  and {} more stretches that differ (--limit)".format(len(blocks) - limit))
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("history", help="an ID.pickle (or ID.pickle.xz) of collect_hf.py --memory-history, or the folder of them")
    parser.add_argument("replay", help="the file plan check --segments-out wrote")
    parser.add_argument("--id", action="append", help="compare only this run (repeatable)")
    parser.add_argument("--limit", type=int, default=10, help="stretches that differ printed per run (default 10)")
    parser.add_argument("--lines", type=int, default=12, help="segments printed of each side of a stretch (default 12)")
    args = parser.parse_args()
    if not os.path.isfile(args.replay):
        fail("no such file: {}".format(args.replay))
    replay = read_replay(args.replay)
    found = histories(args.history)
    wanted = args.id or sorted(found)
    all_same, compared = True, 0
    for run_id in wanted:
        if run_id not in found:
            print("{}: no recorded history in {}".format(run_id, args.history))
            continue
        if run_id not in replay:
            print("{}: no replayed segments in {} (not in the report plan check read, or replayed with "
                  "expandable segments)".format(run_id, args.replay))
            continue
        try:
            history = allocator_history.load(found[run_id])
        except (OSError, lzma.LZMAError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError,
                ValueError) as e:
            fail("{}: not a memory snapshot ({})".format(found[run_id], e))
        if not isinstance(history, dict) or not isinstance(history.get("device_traces", []), list):
            fail("{}: not a memory snapshot (no device_traces)".format(found[run_id]))
        try:
            measured = pytorch_segments(history)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            fail("{}: a history entry is not PyTorch's ({})".format(found[run_id], e))
        all_same = compare(run_id, measured, replay[run_id], args.limit, args.lines) and all_same
        compared += 1
    if compared == 0:
        fail("no run has both a history and replayed segments")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
