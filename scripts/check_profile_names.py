#!/usr/bin/env python3
"""No code outside a training stack's folder refers to the stack by name.

A stack (a profile: planner/profiles/<name>/, registered once in planner/profiles/registry.cpp) is known to the
rest of the code by what it declares (its traits, its allocator model, its checks), never by its name: code
that tests a name would have to change when a stack is added. This script looks, in planner/, cli/ and
validate/ (outside planner/profiles/<name>/ and the registry), for:

  - a profile's name as a string literal ("hf", "fsdp2", "deepspeed", "torchtune", "llmc", "megatron", "trainplan"),
  - `--framework NAME` in a string or a comment,
  - the lowercase words hf, fsdp2, deepspeed, llmc and megatron in a comment or a string, which name the
    profiles (Hugging Face is "HF" or "Hugging Face", llm.c "llm.c"; FSDP2, DeepSpeed, Megatron-LM and
    Megatron-Core are capitalised), unless they are part of a path (planner/profiles/hf/...) or of an
    identifier or option (hf_config, --hf-config).

cli/emit_config.{hpp,cpp} are left out too: `--emit ENGINE` writes a configuration file for a training engine, and
its engine names ("deepspeed", "fsdp", "hf-trainer", "torchtitan") name the file formats a user asks for, not
profiles, though one is spelled as a profile is.

It prints each finding as file:line: text and exits 1 if there is any. Usage: check_profile_names.py [ROOT]
"""
import pathlib
import re
import sys

PROFILES = ("hf", "fsdp2", "deepspeed", "torchtune", "llmc", "megatron", "trainplan")
# "trainplan" is also the project's name, "torchtune" the library whose losses and compile scope other stacks'
# options name (--loss chunked is its CEWithChunkedOutputLoss).
WORD_NAMES = ("hf", "fsdp2", "deepspeed", "llmc", "megatron")

literal = re.compile(r'"(%s)"' % "|".join(PROFILES))
framework_flag = re.compile(r"--framework[ =](%s)\b" % "|".join(PROFILES))
# A lowercase word, not inside a path, an identifier, an option or a model name (hf:<path>).
word = re.compile(r"(?<![\w/.\-])(%s)(?![\w/\-.]|:(?!\s))" % "|".join(WORD_NAMES))


def scannable_text(line):
    """The parts of a C++ line a reader sees as prose: comments and string literals."""
    parts = []
    in_string = False
    i = 0
    start = 0
    while i < len(line):
        c = line[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                parts.append(line[start:i])
                in_string = False
        else:
            if line.startswith("//", i):
                parts.append(line[i + 2:])
                break
            if c == '"':
                in_string = True
                start = i + 1
        i += 1
    return parts


def findings(root):
    out = []
    for top in ("planner", "cli", "validate"):
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".cu", ".cuh"):
                continue
            rel = path.relative_to(root).as_posix()
            if rel.startswith(("planner/profiles/registry.", "cli/emit_config.")):
                continue
            own = next((p for p in PROFILES if rel.startswith(f"planner/profiles/{p}/")), None)
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if line.lstrip().startswith("#include"):
                    continue
                hits = []
                for m in literal.finditer(line):
                    if m.group(1) != own:
                        hits.append(m.group(0))
                for text in scannable_text(line):
                    for m in framework_flag.finditer(text):
                        if m.group(1) != own:
                            hits.append(m.group(0))
                    for m in word.finditer(text):
                        if m.group(1) != own:
                            hits.append(m.group(1))
                if hits:
                    out.append(f"{rel}:{number}: {', '.join(hits)}: {line.strip()}")
    return out


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = findings(root)
    for f in found:
        print(f)
    if found:
        print(f"{len(found)} reference(s) to a profile by name outside its folder", file=sys.stderr)
        return 1
    print("profile names: clean (no profile named outside planner/profiles/<name>/ and the registry)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
