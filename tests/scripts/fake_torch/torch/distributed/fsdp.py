"""torch.distributed.fsdp's fully_shard and MixedPrecisionPolicy (torch/distributed/fsdp/_fully_shard): a module
wrapped once, its parameters cut to a 1/N shard (so that the optimizer's state shrinks), each call logged."""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh


class MixedPrecisionPolicy:
    def __init__(self, param_dtype=None, reduce_dtype=None, output_dtype=None, cast_forward_inputs=True):
        self.param_dtype, self.reduce_dtype = param_dtype, reduce_dtype


def fully_shard(module, *, mesh=None, reshard_after_forward=True, mp_policy=MixedPrecisionPolicy(), offload_policy=None):
    if not isinstance(mesh, DeviceMesh):
        raise TypeError("fully_shard: mesh must be a DeviceMesh")
    if getattr(module, "_fully_sharded", False):
        raise RuntimeError("fully_shard applied twice to one module")
    module._fully_sharded = True
    n = mesh.size()
    for p in module.parameters():
        if not getattr(p, "_sharded", False):
            p.shape = ((p.shape[0] + n - 1) // n,) + tuple(p.shape[1:])
            p._sharded = True
    dist._log("fully_shard", module=getattr(module, "_name", type(module).__name__), reshard_after_forward=reshard_after_forward,
              param_dtype=str(mp_policy.param_dtype), reduce_dtype=str(mp_policy.reduce_dtype))
    return module
