"""Runs scripts/collect_hf.py against tests/scripts/fake_torch (no torch, no GPU needed): every preset
configuration with --profile, then one that runs out of memory, and checks that each line has what the
README says it has and that `plan check` reads the file (exit 1: the fake numbers are far off, but nothing
is malformed; a malformed report exits 2). What it cannot check is the real torch API: that needs a GPU.

    python3 tests/scripts/test_collect_hf.py PLAN_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
COLLECTOR = os.path.join(HERE, "..", "..", "scripts", "collect_hf.py")
FAILURES = []


def check(condition, what):
    if not condition:
        FAILURES.append(what)


def collect(argv, env_extra=None):
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "fake_torch"), **(env_extra or {}))
    return subprocess.run([sys.executable, COLLECTOR] + argv, env=env, capture_output=True, text=True)


def main():
    plan = sys.argv[1]
    sys.path.insert(0, os.path.dirname(COLLECTOR))
    import collect_hf  # pylint: disable=import-outside-toplevel
    # Each line is checked against its own preset entry (the configuration the collector ran), never by its id:
    # the accumulation, the allocator setting, the family, LoRA's dropout as the entry sets them.
    entries = {e["id"]: e for e in collect_hf.PRESETS["all"]}
    for what, has in (("an accumulating", lambda e: e.get("grad_accum", 1) > 1), ("an expandable-segments", lambda e: e.get("expandable")),
                      ("a Phi-3", lambda e: e["model"]["fam"] == "phi3"), ("a lora_dropout", lambda e: e.get("lora_dropout"))):
        check(any(has(e) for e in entries.values()), "the presets have no {} entry: the check below would test nothing".format(what))
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "all.jsonl")
        done = collect(["--preset", "all", "--profile", "-o", report])
        check(done.returncode == 0, "--preset all exited {}: {}".format(done.returncode, done.stderr[-500:]))
        lines = [json.loads(line) for line in open(report)] if os.path.exists(report) else []
        check(len(lines) == 1 + 14 + 21, "{} lines, expected the env line and 35 runs".format(len(lines)))
        check(bool(lines) and lines[0].get("id") == "env", "the first line is not the env line")
        for run in lines[1:]:
            rid = run.get("id")
            entry = entries.get(rid)
            check(entry is not None, "{}: no preset entry of that id".format(rid))
            entry = entry or {"model": {}}
            for key in ("model", "seq", "mbs", "regime", "phases", "alloc_peak", "reserved_peak", "step_s", "segments",
                        "allocator_counts", "host_s", "profile", "params", "trainable_params"):
                check(key in run, "{}: no {}".format(rid, key))
            check(set(run.get("allocator_counts", {})) == {"num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms"},
                  "{}: allocator_counts keys {}".format(rid, sorted(run.get("allocator_counts", {}))))
            check(set(run.get("host_s", {})) == {"forward", "backward", "optimizer"}, "{}: host_s keys".format(rid))
            # The fake profile: kernels [0,10], [5,15], [20,30] us and one memcpy: 3 kernels, 30 us, 25 us busy.
            prof = run.get("profile", {})
            check(prof.get("kernels") == 3 and prof.get("copies") == 1, "{}: profile counts {}".format(rid, prof))
            check(abs(prof.get("busy_s", 0) - 25e-6) < 1e-12 and abs(prof.get("kernel_s", 0) - 30e-6) < 1e-12,
                  "{}: profile times {}".format(rid, prof))
            names = [(n, c, round(t * 1e6, 6)) for n, c, t in prof.get("kernels_by_name", [])]
            check(names == [("gemm", 1, 10.0), ("softmax", 1, 10.0), ("adam", 1, 10.0)],
                  "{}: kernels by name {}".format(rid, names))
            phases = run.get("phases", {})
            check(run.get("alloc_peak") == max(phases.get(k, 0) for k in ("forward_peak", "backward_peak", "optimizer_peak")),
                  "{}: alloc_peak is not the largest phase peak".format(rid))
            check(("inventory" in run) != run.get("gc", False), "{}: an inventory exactly when not checkpointed".format(rid))
            # GradScaler's scale and the steps it skipped (none with the fake scaler), for amp-fp16 only; the
            # accumulation count and the allocator setting as the preset entry set them.
            check(("skipped_steps" in run) == (run.get("regime") == "amp-fp16"), "{}: skipped_steps".format(rid))
            check(run.get("skipped_steps", []) == [], "{}: skipped steps {}".format(rid, run.get("skipped_steps")))
            check(run.get("grad_accum") == entry.get("grad_accum", 1), "{}: grad_accum".format(rid))
            check(run.get("expandable_segments") is bool(entry.get("expandable")), "{}: expandable_segments".format(rid))
            # Phi-3: its family and the window field plan check reads (null: none).
            if entry["model"].get("fam") == "phi3":
                check(run.get("model", {}).get("fam") == "phi3" and "sliding_window" in run.get("model", {}),
                      "{}: model {}".format(rid, run.get("model")))
            check(bool(run.get("lora")) == bool(entry.get("lora")), "{}: lora {!r}".format(rid, run.get("lora")))
            if run.get("lora"):
                check(run["trainable_params"] < run["params"], "{}: LoRA trains fewer parameters".format(rid))
                check(run.get("lora_dtype") == "float32", "{}: lora_dtype {!r}".format(rid, run.get("lora_dtype")))
                check(run.get("lora_dropout") == entry.get("lora_dropout", 0.0),
                      "{}: lora_dropout {!r}".format(rid, run.get("lora_dropout")))
        checked = subprocess.run([plan, "check", report], capture_output=True, text=True)
        check(checked.returncode == 1, "plan check exited {} (1: read, out of tolerance): {}".format(
            checked.returncode, (checked.stdout + checked.stderr)[-500:]))

        # The environment's allocator setting is recorded as it is; --expandable-segments adds it to the rest.
        env_report = os.path.join(tmp, "env.jsonl")
        collect(["--seq", "64", "--id", "x1", "-o", env_report], {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        collect(["--seq", "64", "--id", "x2", "-o", env_report], {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"})
        lines = [json.loads(line) for line in open(env_report)] if os.path.exists(env_report) else []
        check([l.get("expandable_segments") for l in lines[1:]] == [True, False],
              "expandable_segments from the environment: {}".format([l.get("expandable_segments") for l in lines[1:]]))
        check(collect_hf.with_expandable_segments("max_split_size_mb:128,expandable_segments:False")
              == "max_split_size_mb:128,expandable_segments:True", "with_expandable_segments keeps the other options")
        check(collect_hf.expandable_segments_on({"PYTORCH_ALLOC_CONF": "expandable_segments:true"}),
              "PYTORCH_ALLOC_CONF is read too")

        # --memory-history: the allocator's recorded events land in DIR/ID.pickle and the line names the file.
        history, hist_report = os.path.join(tmp, "history"), os.path.join(tmp, "history.jsonl")
        done = collect(["--seq", "64", "--id", "h1", "--memory-history", history, "-o", hist_report])
        lines = [json.loads(line) for line in open(hist_report)] if os.path.exists(hist_report) else []
        path = lines[-1].get("memory_history", "") if lines else ""
        check(done.returncode == 0 and path == os.path.join(history, "h1.pickle") and os.path.isfile(path),
              "--memory-history: exit {}, memory_history {!r}: {}".format(done.returncode, path, done.stderr[-300:]))
        if os.path.isfile(path):
            import pickle
            with open(path, "rb") as f:
                traces = pickle.load(f)["device_traces"]
            check(traces != [[]], "--memory-history dumped before recording started")
            # Each phase labels the events after it (torch.cuda.memory._set_memory_metadata), which
            # compare_allocator_history.py reads; cleared before the dump.
            labels = [e.get("user_metadata") for e in traces[0]]
            expected = ["creation"] + ["step {} {}".format(k, p) for k in (1, 2, 3) for p in ("forward", "backward", "optimizer")] + [""]
            check(labels == expected, "--memory-history phase labels {}, expected {}".format(labels, expected))

        # --only: a preset's named configurations, in the preset's order; an id it lacks is an error, run nothing.
        shared_ids = [e["id"] for e in collect_hf.PRESETS["shared-h100"]]
        earlier, later, elsewhere = shared_ids[4], shared_ids[9], collect_hf.PRESETS["extra"][0]["id"]
        only_report = os.path.join(tmp, "only.jsonl")
        done = collect(["--preset", "shared-h100", "--only", "{},{}".format(later, earlier), "-o", only_report])
        lines = [json.loads(line) for line in open(only_report)] if os.path.exists(only_report) else []
        check(done.returncode == 0 and [l.get("id") for l in lines] == ["env", earlier, later],
              "--only {},{}: exit {}, ids {}".format(later, earlier, done.returncode, [l.get("id") for l in lines]))
        for bad in (["--preset", "shared-h100", "--only", "{},{}".format(earlier, elsewhere)], ["--only", earlier]):
            bad_report = os.path.join(tmp, "bad-only.jsonl")
            done = collect(bad + ["-o", bad_report])
            check(done.returncode == 1 and "--only" in done.stderr and not os.path.exists(bad_report),
                  "{}: exit {}, {!r}".format(" ".join(bad), done.returncode, done.stderr[-200:]))

        oom_report = os.path.join(tmp, "oom.jsonl")
        done = collect(["--family", "llama", "--seq", "64", "--id", "o1", "--memory-history", history, "-o", oom_report],
                       {"FAKE_TORCH_OOM": "forward"})
        check(os.path.isfile(os.path.join(history, "o1.pickle")), "an out-of-memory run does not keep its recorded history")
        check(done.returncode == 0, "an out-of-memory run exited {} (0: recorded)".format(done.returncode))
        lines = [json.loads(line) for line in open(oom_report)] if os.path.exists(oom_report) else []
        check(len(lines) == 2 and lines[1].get("oom") is True and lines[1].get("oom_phase") == "forward",
              "the out-of-memory line: {}".format(lines[1:]))
        check(len(lines) == 2 and "num_alloc_retries" in lines[1].get("allocator_counts", {}),
              "the out-of-memory line has no allocator counts (its retries before failing)")
        checked = subprocess.run([plan, "check", oom_report], capture_output=True, text=True)
        check(checked.returncode in (0, 1) and "ran out of memory" in checked.stdout,
              "plan check on the out-of-memory run exited {}: {}".format(checked.returncode, checked.stdout[-300:]))
    for f in FAILURES:
        print("FAILED: " + f)
    print("collect_hf.py against fake torch: {} failure(s)".format(len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
