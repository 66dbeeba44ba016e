"""torch.distributed as tests/scripts/fake_torch needs it: a process group that is only a record (backend, rank,
world size), the backends the collector asks for ("fake", registered by torch.testing._internal.distributed.fake_pg
as PyTorch's is, and "nccl" under torchrun's environment), and a log of every distributed call: with
FAKE_TORCH_LOG=FILE each call appends a JSON line to FILE, which the test reads to see what the collector wrapped."""
import json
import os

_backends = {}
_group = None


def _log(call, **fields):
    path = os.environ.get("FAKE_TORCH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(dict(call=call, **fields)) + "\n")


class Store:
    pass


class Backend:
    @staticmethod
    def register_backend(name, func, devices=None):
        _backends[name] = func


class _Group:
    def __init__(self, backend, rank, world_size):
        self.backend, self.rank, self.world_size = backend, rank, world_size


def init_process_group(backend, rank=None, world_size=None, store=None, device_id=None):
    global _group
    if _group is not None:
        raise RuntimeError("trying to initialize the default process group twice")
    if backend == "fake":
        if "fake" not in _backends:
            raise ValueError("Invalid backend: 'fake' (import torch.testing._internal.distributed.fake_pg first)")
        if not isinstance(store, Store) or rank is None or world_size is None:
            raise ValueError("the fake backend needs rank, world_size and a store")
    elif backend == "nccl":
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])  # env://, as torchrun sets it
    else:
        raise ValueError("backend {!r} is not in the fake torch".format(backend))
    _group = _Group(backend, rank, world_size)
    _log("init_process_group", backend=backend, rank=rank, world_size=world_size)


def is_initialized():
    return _group is not None


def get_rank():
    return _group.rank


def get_world_size():
    return _group.world_size


def get_backend():
    return _group.backend


def barrier():
    pass


def destroy_process_group():
    global _group
    _log("destroy_process_group")
    _group = None
