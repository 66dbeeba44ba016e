#!/usr/bin/env python3
"""Checks that data flows one way through the source tree: no include runs from a lower folder to a higher
one, no training stack's folder includes another's (but the ones BUILDS_ON lists), and no include cycle exists
between source units.

Top-level folders, lowest first: planner, kernels, validate, cli. Within planner/, the folders in the order
planner/CMakeLists.txt adds them (util first). A unit is a header and its .cpp (foo.hpp + foo.cpp); a cycle
is a chain of includes that leads from a unit back to itself.

Usage: python3 scripts/check_layers.py [REPO_ROOT]   (exit 0 clean, 1 with the violations listed)
"""
import os
import re
import sys

# A stack that runs another's model code builds on that stack's folder: FSDP2 and DeepSpeed (under Hugging Face's
# Trainer or Accelerate) run the hf folder's modules, their op lists and kernels, in the same PyTorch process.
# Only these dependencies are allowed between profile folders; they must not form a cycle.
BUILDS_ON = {"fsdp2": ("hf",), "deepspeed": ("hf",), "torchtune": ("hf",)}

TOP_LEVEL = ["planner", "kernels", "validate", "cli"]
SOURCE_EXTENSIONS = (".hpp", ".cpp", ".cu", ".cuh", ".h")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def planner_order(root):
    """The planner's folders in the order planner/CMakeLists.txt adds them."""
    text = open(os.path.join(root, "planner", "CMakeLists.txt")).read()
    return re.findall(r"^add_subdirectory\((\w+)\)", text, re.M)


def layer_of(path, folders):
    """(rank, profile) of a repository path: rank orders layers, profile names a training stack's folder."""
    parts = path.split("/")
    top = parts[0]
    if top not in TOP_LEVEL:
        return None, None
    if top != "planner":
        return (1 + len(folders) + TOP_LEVEL.index(top), None)
    if len(parts) < 3 or parts[1] not in folders:
        return None, None
    profile = parts[2] if parts[1] == "profiles" and len(parts) > 3 else None
    return (1 + folders.index(parts[1]), profile)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    folders = planner_order(root)
    problems = []
    edges = {}  # unit -> set of units it includes
    for top in TOP_LEVEL:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if not name.endswith(SOURCE_EXTENSIONS):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                rank, profile = layer_of(path, folders)
                if top == "planner" and rank is None and name != "CMakeLists.txt":
                    problems.append(f"{path}: not in a planner folder listed in planner/CMakeLists.txt")
                    continue
                unit = os.path.splitext(path)[0]
                for included in INCLUDE.findall(open(os.path.join(root, path), errors="replace").read()):
                    if not os.path.exists(os.path.join(root, included)):
                        continue  # a system or generated header
                    target_rank, target_profile = layer_of(included, folders)
                    if target_rank is None:
                        continue
                    if target_rank > rank:
                        problems.append(f"{path} includes {included}, a higher layer")
                    elif (profile and target_profile and target_profile != profile
                          and target_profile not in BUILDS_ON.get(profile, ())):
                        problems.append(f"{path} includes {included}, another training stack's folder")
                    target = os.path.splitext(included)[0]
                    if target != unit:
                        edges.setdefault(unit, set()).add(target)
    # Cycles: a depth-first walk that meets a unit still on its path.
    state, stack = {}, []

    def visit(unit):
        state[unit] = "open"
        stack.append(unit)
        for nxt in sorted(edges.get(unit, ())):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[unit] = "done"

    sys.setrecursionlimit(10000)
    for unit in sorted(edges):
        if unit not in state:
            visit(unit)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s)")
        return 1
    print(f"layers: clean ({len(edges)} units; planner folders, lowest first: {', '.join(folders)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
