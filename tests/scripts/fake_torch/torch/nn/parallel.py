"""torch.nn.parallel.DistributedDataParallel: the module behind it, and its gradient buckets allocated (one
copy of the trained parameters' gradients, fp32 in the fake)."""
import torch
import torch.distributed as dist


class DistributedDataParallel:
    def __init__(self, module, device_ids=None, bucket_cap_mb=None, gradient_as_bucket_view=False):
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel before init_process_group")
        self.module = module
        torch.cuda._allocate(sum(p.numel() * 4 for p in module.parameters() if p.requires_grad))
        dist._log("DistributedDataParallel", device_ids=device_ids, bucket_cap_mb=bucket_cap_mb)

    def parameters(self):
        return self.module.parameters()

    def buffers(self):
        return self.module.buffers()

    def train(self):
        return self

    def __call__(self, **kw):
        return self.module(**kw)
