"""torch.profiler as tests/scripts/fake_torch needs it: a profile whose events are two overlapping kernels,
one more kernel, a memcpy and a CPU op (so the collector's sums can be checked: 25 us busy, 30 us summed).
Under the NCCL process group (torchrun's environment) its chrome trace also holds NCCL kernels carrying their
collectives' metadata, as kineto copies it from record_param_comms: two all-reduces of 25 MiB of fp32 (4 and 6
ms), one all-gather of 64 Mi bf16 elements (3 ms) and one reduce-scatter (2 ms), over the world group; a
broadcast (not a collective the planner times) and a kernel without metadata."""
import json
import types

import torch.distributed as dist

ProfilerActivity = types.SimpleNamespace(CPU="cpu", CUDA="cuda")


class _Event:
    def __init__(self, name, start, end, device_type):
        self.name, self.device_type = name, device_type
        self.time_range = types.SimpleNamespace(start=start, end=end)


class profile:
    def __init__(self, activities=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def export_chrome_trace(self, path):
        events = [dict(ph="X", cat="kernel", name=e.name, ts=e.time_range.start, dur=e.time_range.end - e.time_range.start, args={})
                  for e in self.events() if e.device_type == "cuda"]
        if dist.is_initialized() and dist.get_backend() == "nccl":
            n = dist.get_world_size()
            ranks = json.dumps(list(range(n)))

            def coll(name, coll_name, nin, nout, dtype, dur):
                return dict(ph="X", cat="kernel", name=name, ts=100, dur=dur,
                            args={"Collective name": coll_name, "In msg nelems": nin, "Out msg nelems": nout,
                                  "Group size": n, "dtype": dtype, "Process Group Ranks": ranks})
            bucket = 25 << 18  # 25 MiB of fp32
            events += [coll("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce", bucket, bucket, "Float", 4000),
                       coll("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce", bucket, bucket, "Float", 6000),
                       coll("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "_allgather_base", (64 << 20) // n, 64 << 20, "BFloat16", 3000),
                       coll("ncclDevKernel_ReduceScatter_Sum_f32_RING_SIMPLE(ncclDevKernelArgsStorage<4096ul>)", "_reduce_scatter_base", 16 << 20, (16 << 20) // n, "Float", 2000),
                       coll("ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "broadcast", 1024, 1024, "Float", 50),
                       dict(ph="X", cat="kernel", name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", ts=0, dur=7, args={})]
        with open(path, "w") as f:
            json.dump({"traceEvents": events + [dict(ph="X", cat="cpu_op", name="aten::mm", ts=0, dur=100)]}, f)

    def events(self):
        return [_Event("gemm", 0, 10, "cuda"), _Event("softmax", 5, 15, "cuda"), _Event("adam", 20, 30, "cuda"),
                _Event("Memcpy HtoD", 30, 31, "cuda"), _Event("aten::mm", 0, 100, "cpu")]
