"""Runs scripts/compare_allocator_history.py on histories made from the replay's own segments (what
`plan check --segments-out` writes for the shared H100 report): the same segments in the same order compare
equal (exit 0); with two of the replay's segments missing and one it never makes, the differing stretches
are named with PyTorch's step and phase and the replay's buffers (exit 1); bad inputs exit 2. Real
histories need a GPU (collect_hf.py --memory-history); these stand-ins have the pickle's real layout.

    python3 tests/scripts/test_compare_allocator_history.py PLAN_BINARY
"""
import json
import lzma
import os
import pickle
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "compare_allocator_history.py")
SHARED = os.path.join(ROOT, "tests", "data", "measurements", "pytorch-hf-h100-2026-11-22.jsonl")
FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)


def frames_for(step, phase):
    """A stack as PyTorch records it for an allocation in that phase (paths as in torch 2.11)."""
    if phase == "creation":
        return [{"filename": "torch/nn/modules/module.py", "line": 1, "name": "_apply"}]
    if phase == "optimizer":
        return [{"filename": "torch/optim/adamw.py", "line": 1, "name": "step"}]
    if phase == "backward":
        return []
    return [{"filename": "transformers/models/gpt2/modeling_gpt2.py", "line": 1, "name": "forward"}]


def history_of(segments, labels):
    """A snapshot dict whose trace makes these (bytes, step, phase) segments, each followed by an allocation
    in its phase: labelled as collect_hf.py labels them (user_metadata), or only with Python stacks, from
    which the script counts the steps."""
    trace = []
    for size, step, phase in segments:
        for action in ("segment_alloc", "alloc"):
            entry = {"action": action, "addr": 0, "size": size if action == "segment_alloc" else 512, "stream": 0}
            if labels:
                entry["user_metadata"] = "creation" if step == 0 else "step {} {}".format(step, phase)
                entry["frames"] = []
            else:
                entry["frames"] = frames_for(step, phase)
            trace.append(entry)
    return {"segments": [], "device_traces": [trace]}


def compare(argv):
    return subprocess.run([sys.executable, SCRIPT] + argv, capture_output=True, text=True)


def main():
    plan = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        replay = os.path.join(tmp, "replay.jsonl")
        done = subprocess.run([plan, "check", SHARED, "--segments-out", replay], capture_output=True, text=True)
        check(done.returncode in (0, 1), "plan check exited {}: {}".format(done.returncode, done.stderr))
        lines = [json.loads(line) for line in open(replay)]
        # The stand-in histories are made from the shared file's first checkpointed GPT-2 run (chosen by its
        # configuration, not its id): its replay makes the loss's two [b*s, V] fp32 segments again in step 2,
        # which one of them then leaves out.
        shared = [json.loads(line) for line in open(SHARED)][1:]
        rid = next(r["id"] for r in shared if r["model"]["fam"] == "gpt2" and r["gc"])
        other = next(r["id"] for r in shared if r["id"] != rid)  # a run given no history
        run = [l for l in lines if l["id"] == rid]
        check(len(run) > 20, "{} has {} replayed segments".format(rid, len(run)))
        check(all(list(l) == ["id", "step", "pool", "bytes", "tensor", "reserved_bytes"] for l in lines), "field order")
        check(sum(l["bytes"] for l in run) == run[-1]["reserved_bytes"], "{}'s segments do not sum to its reserved bytes".format(rid))
        check({l["id"] for l in lines} == {r["id"] for r in shared}, "not every shared run is in the file")
        # The phases PyTorch would record: creation (step 0), then each step's forward, backward, optimizer.
        # Within a step the replay's own order: its segments before the loss are the forward's.
        def phase(l):
            if l["step"] == 0:
                return "creation"
            if l["tensor"].startswith("adam"):
                return "optimizer"
            return "backward" if "grad" in l["tensor"] else "forward"
        same = [(l["bytes"], l["step"], phase(l)) for l in run]
        hist = os.path.join(tmp, "history")
        os.makedirs(hist)
        for labels in (True, False):
            with open(os.path.join(hist, rid + ".pickle"), "wb") as f:
                pickle.dump(history_of(same, labels), f)
            r = compare([hist, replay])
            check(r.returncode == 0, "identical segments: exit {} ({})".format(r.returncode, r.stdout + r.stderr))
            check("the same segments in the same order" in r.stdout, "identical segments not reported so")
            check("PyTorch {} segments".format(len(run)) in r.stdout, "PyTorch's count: " + r.stdout[:300])
        # The same history compressed, as data/measurements/ stores them: ID.pickle.xz is run ID.
        xz_dir = os.path.join(tmp, "xz")
        os.makedirs(xz_dir)
        with lzma.open(os.path.join(xz_dir, rid + ".pickle.xz"), "wb") as f:
            pickle.dump(history_of(same, True), f)
        for where in (xz_dir, os.path.join(xz_dir, rid + ".pickle.xz")):
            r = compare([where, replay])
            check(r.returncode == 0 and "the same segments in the same order" in r.stdout,
                  "an .xz history ({}): exit {} ({})".format(where, r.returncode, r.stdout + r.stderr))
        # Step 2's two 786 MiB loss segments missing, one 394 MiB segment in step 2's forward instead.
        big = 786 << 20
        step2 = [k for k, s in enumerate(same) if s[1] == 2 and s[0] == big]
        check(len(step2) == 2, "the replay makes {} 786 MiB segments in step 2, expected 2".format(len(step2)))
        for labels in ((True, False) if len(step2) == 2 else ()):
            differs = [s for k, s in enumerate(same) if k not in step2]
            differs.insert(step2[0], (394 << 20, 2, "forward"))
            with open(os.path.join(hist, rid + ".pickle"), "wb") as f:
                pickle.dump(history_of(differs, labels), f)
            r = compare([hist, replay, "--id", rid])
            check(r.returncode == 1, "differing segments: exit {}".format(r.returncode))
            out = [" ".join(line.split()) for line in r.stdout.splitlines()]
            check("PyTorch's segment {} where the replay made its segments {}-{}:".format(step2[0] + 1, step2[0] + 1, step2[0] + 2) in out,
                  "the stretch not located: " + r.stdout)
            check("PyTorch 394 MiB large step 2 forward" in out, "PyTorch's segment not named: " + r.stdout)
            check("replay 786 MiB large step 2 loss.log_probs" in out, "the replay's buffer not named: " + r.stdout)
            check("replay 786 MiB large step 2 loss.grad_logits_fp32" in out, "the second not named: " + r.stdout)
            by_step = {}
            for size, step, _ in differs:
                n, b = by_step.get(step, (0, 0))
                by_step[step] = (n + 1, b + size)
            expected = "PyTorch {} segments, {:.2f} GiB: ".format(len(differs), sum(d[0] for d in differs) / (1 << 30)) + ", ".join(
                "{}: {} ({:.2f} GiB)".format("creation" if k == 0 else "step {}".format(k), n, b / (1 << 30))
                for k, (n, b) in sorted(by_step.items()))
            check(expected in out, "PyTorch's summary, by step as the stacks say, is not " + expected + ": " + r.stdout)
        # A run with no history and one with no replay are said so; nothing comparable at all exits 2.
        r = compare([hist, replay, "--id", other, "--id", rid])
        check("{}: no recorded history".format(other) in r.stdout, "a run without a history not named")
        # Bad inputs: one line on stderr, exit 2.
        junk = os.path.join(tmp, "junk.pickle")
        with open(junk, "wb") as f:
            f.write(b"not a pickle")
        junk_xz = os.path.join(tmp, "junk.pickle.xz")
        with open(junk_xz, "wb") as f:
            f.write(b"not xz data")
        notdict = os.path.join(tmp, "list.pickle")
        with open(notdict, "wb") as f:
            pickle.dump([1, 2], f)
        badsize = os.path.join(tmp, rid + ".pickle")
        with open(badsize, "wb") as f:
            pickle.dump({"device_traces": [[{"action": "segment_alloc", "size": "big", "frames": []}]]}, f)
        badreplay = os.path.join(tmp, "bad.jsonl")
        with open(badreplay, "w") as f:
            f.write(json.dumps({"id": rid}) + "\n")
        for argv, what in (([os.path.join(tmp, "none"), replay], "a missing history"),
                           ([hist, os.path.join(tmp, "none.jsonl")], "a missing replay"),
                           ([junk, replay], "a file that is not a pickle"),
                           ([junk_xz, replay], "an .xz file that is not xz data"),
                           ([notdict, replay], "a pickle that is not a snapshot"),
                           ([badsize, replay], "a segment size that is not a number"),
                           ([hist, badreplay], "a replay line without its fields"),
                           ([hist, replay, "--id", "no-such-run"], "no run to compare")):
            r = compare(argv)
            check(r.returncode == 2, "{}: exit {} ({})".format(what, r.returncode, r.stderr[-300:]))
            check(len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr,
                  "{}: not one line: {}".format(what, r.stderr[-300:]))
    for f in FAILURES:
        print("FAILED: " + f)
    print("compare_allocator_history: {} failures".format(len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
