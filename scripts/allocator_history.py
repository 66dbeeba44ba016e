"""Reading the allocator histories collect_hf.py --memory-history records (torch.cuda.memory._dump_snapshot):
ID.pickle as written, or ID.pickle.xz as the project stores them (data/measurements/, about 25 times smaller).
Used by compare_allocator_history.py and allocator_trace_from_history.py; only the standard library."""
import lzma
import os
import pickle

SUFFIXES = (".pickle.xz", ".pickle")


def run_id(path):
    """The run id a history file is named for: S5 for .../S5.pickle or .../S5.pickle.xz."""
    name = os.path.basename(path)
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def is_history(name):
    return name.endswith(SUFFIXES)


def load(path):
    """The unpickled snapshot. Raises OSError, lzma.LZMAError or pickle's errors for a file that is not one."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rb") as f:
        return pickle.load(f)
