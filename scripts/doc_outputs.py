#!/usr/bin/env python3
"""Checks (or refreshes) the outputs the README and docs/ quote, by running the commands they name.

A quoted output is a fenced block right after one or more marker lines:

    <!-- output: build/plan --params 7B --seq 4096 --gpu h100 -->
    ```
    Verdict: DOES NOT FIT: peak 131.92 GiB of 79.18 GiB, short by 52.75 GiB
    ...
    ```

Every line of the block must be a line of the commands' output (their outputs one after the other), in the
block's order; a line `...` stands for lines left out, and a line starting with `$ ` shows the command and is
not compared (nor are its `\` continuation lines); a command's output is its stdout, then its stderr (a sweep's summary). The command must also be shown to the reader (in a shell block or on a `$ ` line of the same
page), so the page cannot quote one command and show another. `<!-- output, times vary: ... -->` compares
lines with their durations in seconds blanked, for outputs that say how long the machine took ("in 14.32 s").

A block that looks like plan's report (a `Verdict:` or `trainplan:` line, or a `$ build/plan` line) must be
marked, so no quoted output is left unchecked; docs/accuracy.md is exempt (written in part by
scripts/accuracy_page.py, and its appendix quotes the past).

  doc_outputs.py PLAN [ROOT]            check; exit 1 naming each quoted line the output no longer has
  doc_outputs.py PLAN [ROOT] --update   rewrite each quoted line with the output line of the same shape
                                        (its numbers blanked), the way to follow a change of the model

Each command runs under bash in a scratch folder that links to the repository's top-level entries, with
build/plan the binary given (a command's -o file lands there, and `head -3 sweep.csv` reads it back), and
HF_HUB_CACHE pointed at an empty folder (no model in the user's cache changes what --model reads).
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = re.compile(r"^<!-- output(?P<vary>, times vary)?: (?P<cmd>.+?) -->\s*$")
REPORT_LIKE = re.compile(r"^\s*(Verdict: |trainplan: |\$ (build/)?plan\b)")
EXEMPT = {"accuracy.md"}
NUMBER = re.compile(r"[-+]?\d[\d,]*(\.\d+)?(e[-+]?\d+)?")
SECONDS = re.compile(r"\d[\d,]*(\.\d+)?(e[-+]?\d+)? s\b")  # a wall-clock duration: "in 14.32 s"


def shape(line):
    """A line with its numbers blanked and its spacing collapsed: what stays when the figures move."""
    return " ".join(NUMBER.sub("#", line).split())


def without_times(line):
    return SECONDS.sub("# s", line.rstrip())


def normalized(text):
    """Shell text with continuations joined and spacing collapsed, to find a command on a page."""
    return " ".join(text.replace("\\\n", " ").split())


def pages(root):
    found = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    return [p for p in found if p.exists()]


def blocks(lines):
    """(first marker index, [(command, numbers_vary)], body start, body end) of each marked block, and the
    unmarked fences that look like a report."""
    marked, unmarked = [], []
    i = 0
    while i < len(lines):
        markers, j = [], i
        while j < len(lines) and MARKER.match(lines[j]):
            m = MARKER.match(lines[j])
            markers.append((m.group("cmd"), bool(m.group("vary"))))
            j += 1
        if markers and j < len(lines) and lines[j].startswith("```"):
            end = j + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            marked.append((i, markers, j + 1, end))
            i = end + 1
        elif markers:
            raise SystemExit(f"line {i + 1}: an output marker must be followed by a fenced block")
        elif lines[i].startswith("```"):
            end = i + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            lang = lines[i][3:].strip()
            if lang not in ("sh", "bash") and any(REPORT_LIKE.match(b) for b in lines[i + 1:end]):
                unmarked.append(i)
            i = end + 1
        else:
            i += 1
    return marked, unmarked


def run(command, scratch, env):
    done = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode not in (0, 1):  # 1 is "does not fit"; 2 is bad input, a stale command
        raise SystemExit(f"'{command}' exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout.splitlines() + done.stderr.splitlines()  # what the terminal shows; stderr after


def compare(body, output, vary, update):
    """Matches the block's lines in order; returns (new body, [problems])."""
    new_body, problems, at, prompt = list(body), [], 0, False
    for k, quoted in enumerate(body):
        if quoted.startswith("$ ") or prompt:  # a command shown, and its continuation lines
            prompt = quoted.rstrip().endswith("\\")
            continue
        if quoted.strip() in ("...", ""):
            continue
        want = quoted.rstrip()
        same = (lambda o: without_times(o) == without_times(want)) if vary else (lambda o: o.rstrip() == want)
        exact = next((n for n in range(at, len(output)) if same(output[n])), None)
        if exact is not None:
            at = exact + 1
            continue
        alike = next((n for n in range(at, len(output)) if shape(output[n]) == shape(want)), None)
        if update and alike is not None:  # numbers that vary are refreshed too
            new_body[k] = output[alike].rstrip()
            at = alike + 1
            continue
        hint = f"\n      the output now has: {output[alike].rstrip()}" if alike is not None else \
            "\n      and no line of the same shape: quote it again by hand"
        problems.append(f"quoted line not in the output: {want}{hint}")
    return new_body, problems


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    update = "--update" in argv[1:]
    if not args:
        raise SystemExit(__doc__)
    plan = Path(args[0]).resolve()
    root = Path(args[1] if len(args) > 1 else Path(__file__).resolve().parent.parent).resolve()
    failures, checked = 0, 0
    with tempfile.TemporaryDirectory() as scratch:
        for entry in root.iterdir():
            if entry.name not in ("build", ".git"):
                os.symlink(entry, Path(scratch) / entry.name)
        (Path(scratch) / "build").mkdir()
        os.symlink(plan, Path(scratch) / "build" / "plan")  # the commands run build/plan, as the pages show
        env = dict(os.environ, LC_ALL="C", HF_HUB_CACHE=str(Path(scratch) / "no-hf-cache"))
        env.pop("HF_HOME", None)
        for page in pages(root):
            text = page.read_text()
            lines = text.split("\n")
            try:
                marked, unmarked = blocks(lines)
            except SystemExit as e:
                raise SystemExit(f"{page.relative_to(root)}: {e}")
            shown = normalized(text.replace("\n$ ", "\n"))
            if page.name not in EXEMPT:
                for i in unmarked:
                    print(f"{page.relative_to(root)}:{i + 1}: a quoted report without an output marker "
                          f"(<!-- output: COMMAND --> on the line before)")
                    failures += 1
            changed = False
            for first, markers, start, end in marked:
                output = []
                for command, _ in markers:
                    if normalized(command) not in shown:
                        print(f"{page.relative_to(root)}:{first + 1}: '{command}' is not shown on the page")
                        failures += 1
                    output += run(command, scratch, env)
                vary = any(v for _, v in markers)
                new_body, problems = compare(lines[start:end], output, vary, update)
                checked += 1
                for p in problems:
                    print(f"{page.relative_to(root)}:{start + 1}: {p}")
                failures += len(problems)
                if new_body != lines[start:end]:
                    lines[start:end] = new_body
                    changed = True
            if changed:
                page.write_text("\n".join(lines))
                print(f"{page.relative_to(root)}: quoted outputs refreshed")
    print(f"{checked} quoted outputs checked, {failures} problems"
          + ("" if not failures or update else " (scripts/doc_outputs.py PLAN --update follows moved figures)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
