"""torch.distributed.optim.ZeroRedundancyOptimizer: the wrapped optimizer over this rank's share."""
import torch
import torch.distributed as dist


class ZeroRedundancyOptimizer(torch._Optimizer):
    def __init__(self, params, optimizer_class, **defaults):
        params = list(params)
        n, r = dist.get_world_size(), dist.get_rank()
        super().__init__(params[r::n])  # a round-robin share: what this rank's AdamW updates
        dist._log("ZeroRedundancyOptimizer", optimizer_class=optimizer_class.__name__, params=len(params), shard=len(self.params))
