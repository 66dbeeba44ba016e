"""torch.distributed.tensor.parallel: parallelize_module with column- and row-wise styles; each plan logged, and
every module the plan names must exist."""
import torch.distributed as dist


class ColwiseParallel:
    pass


class RowwiseParallel:
    pass


def parallelize_module(module, device_mesh, parallelize_plan):
    for name, style in parallelize_plan.items():
        target = module
        for part in name.split("."):
            target = getattr(target, part)  # AttributeError: the plan names a module the layer lacks
        n = device_mesh.size()
        for p in target.parameters():
            p.shape = (p.shape[0] // n,) + tuple(p.shape[1:])
    dist._log("parallelize_module", module=getattr(module, "_name", "?"),
              plan={k: type(v).__name__ for k, v in parallelize_plan.items()})
    return module
