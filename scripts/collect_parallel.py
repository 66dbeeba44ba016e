"""collect_parallel.py: the several-GPU layouts of scripts/collect_hf.py (--parallel fsdp2|ddp|zero1|tp).

Two ways to run them:

  * one GPU, one rank of N (--world-size N --rank r): PyTorch's fake process group. Every collective completes
    at once without communicating, but fully_shard, DistributedDataParallel, ZeroRedundancyOptimizer and DTensor
    tensor parallelism still allocate their real per-rank shards and buffers, so one GPU measures the per-rank
    memory of an N-GPU run (NCCL's own buffers excepted). Its step time is not an N-GPU step time: the report
    says so ("time_comparable": false) and `plan check` compares memory only.
    torch/testing/_internal/distributed/fake_pg.py registers the backend "fake" when imported and provides
    FakeStore, "a fake Key-Value store simply for initialization usage of fake process group"; the process
    group itself is FakeProcessGroup (Python in older torch, torch._C._distributed_c10d.FakeProcessGroup in newer).
  * under torchrun (RANK, WORLD_SIZE and LOCAL_RANK set): the real process group (NCCL) on cuda:LOCAL_RANK. The
    step time is comparable, and with --profile the NCCL kernels of the profiled step are recorded per collective
    ("collectives"), which `plan calibrate --cluster-from` fits the cluster's bandwidths to. Rank 0 writes the report.

The modes, as the report names them ("parallel": {"mode": ...}), and the stack `plan check` predicts them with:

  fsdp2  "fully_shard"  fully_shard on every decoder layer, then on the root
                        (torch/distributed/fsdp/_fully_shard/_fully_shard.py), one 1-D DeviceMesh over the N ranks,
                        reshard_after_forward left at its default (True), MixedPrecisionPolicy(param_dtype=bfloat16,
                        reduce_dtype=float32) for --regime bf16-mixed (_fsdp_api.py); stack fsdp2, --zero 3
  ddp    "ddp"          torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25, PyTorch's default);
                        stack hf, --zero 0 (its DDP buckets)
  zero1  "zero1"        DDP as above and torch.distributed.optim.ZeroRedundancyOptimizer(optimizer_class=AdamW):
                        each rank keeps the AdamW state of its share of the parameters; stack hf, --zero 1
  tp     "tp"           DTensor tensor parallelism: parallelize_module on every decoder layer with ColwiseParallel
                        on q, k, v, gate and up and RowwiseParallel on o and down
                        (torch/distributed/tensor/parallel/style.py), embeddings and head replicated. No stack
                        models DTensor TP over Hugging Face modules yet: `plan check` says it cannot predict it.
"""

import json
import os
import statistics
import sys
import tempfile

PARALLEL_MODES = ("none", "fsdp2", "ddp", "zero1", "tp")
# The report's name of each mode (not the stacks' names: the planner reads the mode, the stack comes apart).
REPORT_MODE = {"fsdp2": "fully_shard", "ddp": "ddp", "zero1": "zero1", "tp": "tp"}
# The stack `plan check` predicts each with (the run line's "stack").
STACK = {"fsdp2": "fsdp2", "ddp": "hf", "zero1": "hf", "tp": "hf"}
# Families whose decoder layers have q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj and down_proj.
TP_FAMILIES = ("llama", "mistral", "qwen2")
TP_PLAN = {"self_attn.q_proj": "colwise", "self_attn.k_proj": "colwise", "self_attn.v_proj": "colwise",
           "self_attn.o_proj": "rowwise", "mlp.gate_proj": "colwise", "mlp.up_proj": "colwise",
           "mlp.down_proj": "rowwise"}
DDP_BUCKET_CAP_MB = 25  # DistributedDataParallel's default bucket_cap_mb
MAX_WORLD_SIZE = 1024


class Layout:
    """Where this process stands: the mode, its rank among world_size, and the process group."""

    def __init__(self, mode, world_size, rank, process_group, local_rank=0, local_world_size=1):
        self.mode, self.world_size, self.rank, self.process_group = mode, world_size, rank, process_group
        self.local_rank, self.local_world_size = local_rank, local_world_size

    @property
    def nodes(self):
        """Nodes the ranks span (torchrun: WORLD_SIZE / LOCAL_WORLD_SIZE); the fake group lays them out as the
        planner does, which --gpus N on a cluster preset decides: not recorded."""
        if self.process_group != "nccl":
            return None
        return max(1, self.world_size // max(1, self.local_world_size))

    @property
    def writes_report(self):
        return self.rank == 0 or self.process_group == "fake"


def torchrun_env(environ):
    """(rank, world_size, local_rank, local_world_size) when torchrun (or another launcher setting the same
    variables) started this process, else None."""
    if not all(k in environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return None
    try:
        rank, world, local = int(environ["RANK"]), int(environ["WORLD_SIZE"]), int(environ["LOCAL_RANK"])
        local_world = int(environ.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        raise SystemExit("collect_hf: RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE must be whole numbers")
    return rank, world, local, local_world


def resolve_layout(args, environ):
    """The Layout of --parallel/--world-size/--rank and the environment, or None for one GPU. Flag errors are
    SystemExit before torch is imported."""
    launched = torchrun_env(environ)
    if args.parallel == "none":
        if args.world_size is not None or args.rank is not None:
            raise SystemExit("collect_hf: --world-size and --rank need --parallel fsdp2, ddp, zero1 or tp")
        if launched is not None and launched[1] > 1:
            raise SystemExit("collect_hf: started by torchrun with WORLD_SIZE {}: name the layout with --parallel".format(launched[1]))
        return None
    if args.preset:
        raise SystemExit("collect_hf: --parallel runs one configuration, not a --preset")
    if launched is not None:
        rank, world, local, local_world = launched
        if args.world_size not in (None, world) or args.rank not in (None, rank):
            raise SystemExit("collect_hf: under torchrun the rank and world size are RANK={} and WORLD_SIZE={}: "
                             "leave out --world-size and --rank".format(rank, world))
        if world < 2:
            raise SystemExit("collect_hf: --parallel under torchrun needs WORLD_SIZE of at least 2")
        if local_world < 1 or world % local_world:
            raise SystemExit("collect_hf: WORLD_SIZE {} is not a whole number of nodes of LOCAL_WORLD_SIZE {}".format(world, local_world))
        layout = Layout(args.parallel, world, rank, "nccl", local, local_world)
    else:
        if args.world_size is None:
            raise SystemExit("collect_hf: --parallel {} on one GPU needs --world-size N (the fake process group's ranks)".format(args.parallel))
        rank = 0 if args.rank is None else args.rank
        if not 2 <= args.world_size <= MAX_WORLD_SIZE:
            raise SystemExit("collect_hf: --world-size must be from 2 to {}".format(MAX_WORLD_SIZE))
        if not 0 <= rank < args.world_size:
            raise SystemExit("collect_hf: --rank must be from 0 to --world-size - 1")
        layout = Layout(args.parallel, args.world_size, rank, "fake")
    check_mode(args, layout)
    return layout


def check_mode(args, layout):
    """What each mode needs of the model and the run (SystemExit naming the flag)."""
    n = layout.world_size
    if args.parallel == "fsdp2":
        if args.lora:
            raise SystemExit("collect_hf: --parallel fsdp2 trains all weights: no --lora")
        if args.regime not in ("bf16-mixed", "fp32"):
            raise SystemExit("collect_hf: --parallel fsdp2 takes --regime bf16-mixed (MixedPrecisionPolicy(param_dtype="
                             "bfloat16, reduce_dtype=float32) over fp32 parameters) or fp32 (no policy), not " + args.regime)
    elif args.regime == "bf16-mixed":
        raise SystemExit("collect_hf: --regime bf16-mixed is fully_shard's MixedPrecisionPolicy: --parallel fsdp2 only")
    if args.parallel == "tp":
        if args.family not in TP_FAMILIES:
            raise SystemExit("collect_hf: --parallel tp splits q/k/v/o_proj and gate/up/down_proj: --family {} (not {})".format(
                ", ".join(TP_FAMILIES), args.family))
        if args.heads % n or args.kv_heads % n or args.ffn % n:
            raise SystemExit("collect_hf: --parallel tp over {} ranks needs --heads, --kv-heads and --ffn divisible by {}".format(n, n))
        if args.lora:
            raise SystemExit("collect_hf: --parallel tp trains all weights: no --lora")
    if args.inventory:
        print("collect_hf: note: no inventory for a --parallel run (its saved tensors are DTensors or shards)", file=sys.stderr)


def init_process_group(torch, layout):
    """The fake group (one GPU standing for rank r of N) or NCCL under torchrun."""
    import torch.distributed as dist
    if layout.process_group == "fake":
        # Importing fake_pg registers the "fake" backend (dist.Backend.register_backend("fake", _create_fake_pg));
        # FakeStore is the store its docstring names for initialisation.
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", rank=layout.rank, world_size=layout.world_size, store=FakeStore())
    else:
        dev = torch.device("cuda", layout.local_rank)
        try:  # device_id binds the communicator to this GPU eagerly (torch >= 2.3)
            dist.init_process_group("nccl", device_id=dev)
        except TypeError:
            dist.init_process_group("nccl")
    return dist


def destroy_process_group(torch):
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()


def device_index(layout):
    return layout.local_rank if layout is not None and layout.process_group == "nccl" else 0


def decoder_layers(model, family):
    """The decoder layers of a transformers causal LM: GPT2LMHeadModel.transformer.h, the others' model.layers."""
    return list(model.transformer.h) if family == "gpt2" else list(model.model.layers)


def _fsdp_api():
    try:  # public from torch 2.6
        from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
    except ImportError:  # torch 2.4-2.5
        from torch.distributed._composable.fsdp import fully_shard, MixedPrecisionPolicy
    return fully_shard, MixedPrecisionPolicy


def _mesh(torch, layout):
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh("cuda", (layout.world_size,))


def wrap_model(args, torch, model, layout, dev):
    """The model as the mode trains it (already on `dev`), and what the report says of the wrapping."""
    info = {}
    if layout.mode == "fsdp2":
        fully_shard, MixedPrecisionPolicy = _fsdp_api()
        mesh = _mesh(torch, layout)
        if args.regime == "bf16-mixed":
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            info.update(param_dtype="bfloat16", reduce_dtype="float32")
        else:
            mp = MixedPrecisionPolicy()
            info.update(param_dtype="float32", reduce_dtype="float32")
        layers = decoder_layers(model, args.family)
        for layer in layers:  # one FSDP unit per decoder layer: its all-gather and reduce-scatter
            fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)  # the root: embeddings, final norm and head
        info.update(units=len(layers) + 1, reshard_after_forward=True)
        return model, info
    if layout.mode in ("ddp", "zero1"):
        from torch.nn.parallel import DistributedDataParallel
        wrapped = DistributedDataParallel(model, device_ids=[dev.index], bucket_cap_mb=DDP_BUCKET_CAP_MB)
        info.update(bucket_cap_mb=DDP_BUCKET_CAP_MB, gradient_as_bucket_view=False)
        return wrapped, info
    if layout.mode == "tp":
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = _mesh(torch, layout)
        styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
        for layer in decoder_layers(model, args.family):
            parallelize_module(layer, mesh, {name: styles[kind]() for name, kind in TP_PLAN.items()})
            # Older transformers reshape q, k and v by the module's own head counts: the local ones now (newer
            # ones reshape by -1 and head_dim; PyTorch's TP tutorial adjusts these attributes the same way).
            attn = layer.self_attn
            for name in ("num_heads", "num_key_value_heads"):
                if isinstance(getattr(attn, name, None), int):
                    setattr(attn, name, getattr(attn, name) // layout.world_size)
            if isinstance(getattr(attn, "hidden_size", None), int):
                attn.hidden_size //= layout.world_size
        info.update(tp_plan=dict(TP_PLAN), replicated="embeddings, norms, lm_head")
        return model, info
    raise ValueError(layout.mode)


def make_optimizer(torch, layout, params, opt_kw):
    """AdamW(lr=1e-4) as the single-GPU collector makes it, or for zero1 ZeroRedundancyOptimizer around it."""
    if layout is not None and layout.mode == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        return ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW, lr=1e-4, **opt_kw)
    return torch.optim.AdamW(params, lr=1e-4, **opt_kw)


def report_fields(layout, info):
    """The run line's layout: "stack", "time_comparable" and "parallel"."""
    par = dict(mode=REPORT_MODE[layout.mode], world_size=layout.world_size, rank=layout.rank,
               process_group=layout.process_group)
    if layout.process_group == "nccl":
        par.update(nodes=layout.nodes, gpus_per_node=layout.local_world_size)
    par.update(info)
    fields = dict(stack=STACK[layout.mode], parallel=par, time_comparable=layout.process_group != "fake")
    if layout.process_group == "fake":
        fields["time_note"] = "fake process group: collectives complete at once; memory only"
    return fields


# ----------------------------------------------------------------------------------------------------------
# NCCL kernels of a profiled step

# c10::ScalarType's names as the profiler writes the "dtype" of a collective, and their sizes in bytes.
DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Byte": 1, "Char": 1, "Short": 2, "Int": 4,
               "Long": 8, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1}
# The collective in an NCCL kernel's name (ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclKernel_AllGather_RING_LL_Sum_int8_t,
# ...): the planner's names (planner/system/collective.hpp), and NCCL's others as they are.
KERNEL_KINDS = (("AllReduce", "all_reduce"), ("AllGather", "all_gather"), ("ReduceScatter", "reduce_scatter"),
                ("AllToAll", "all_to_all"), ("SendRecv", "send_recv"), ("Broadcast", "broadcast"), ("Reduce", "reduce"))
ALGORITHMS = ("NVLS_TREE", "NVLS", "COLLNET_DIRECT", "COLLNET_CHAIN", "RING", "TREE", "PAT")
PROTOCOLS = ("LL128", "LL", "SIMPLE")


def _kernel_kind(name, coll_name):
    if coll_name and ("alltoall" in coll_name.replace("_", "").lower()):
        return "all_to_all"  # NCCL runs all-to-all as grouped sends and receives
    stem = name.split("(")[0]
    for prefix in ("ncclDevKernel_", "ncclKernel_"):
        if stem.startswith(prefix):
            stem = stem[len(prefix):]
            break
    for token, kind in KERNEL_KINDS:
        if stem.startswith(token):
            return kind
    return None


def _algorithm(name):
    stem = name.split("(")[0].upper()
    algorithm = next((a for a in ALGORITHMS if "_" + a + "_" in stem + "_"), None)
    protocol = next((p for p in PROTOCOLS if stem.endswith("_" + p) or "_" + p + "_" in stem), None)
    return algorithm, protocol


def _group_nodes(args, group_size, layout):
    """Nodes a communicator spans: from its ranks where the profiler lists them, else the world's nodes for the
    world group and the fewest nodes that hold the group otherwise."""
    ranks = args.get("Process Group Ranks")
    if isinstance(ranks, str):
        try:
            ranks = json.loads(ranks)
        except ValueError:
            ranks = None
    per_node = max(1, layout.local_world_size)
    if isinstance(ranks, list) and ranks and all(isinstance(r, int) for r in ranks):
        return len({r // per_node for r in ranks})
    if group_size >= layout.world_size:
        return layout.nodes or 1
    return max(1, -(-group_size // per_node))


def nccl_collectives(trace_events, layout):
    """The NCCL kernels of a chrome trace (torch.profiler's export_chrome_trace, CPU and CUDA activity), grouped
    by collective, message size and communicator: [{"kind", "bytes", "ranks", "nodes", "dtype", "calls",
    "seconds" (the median kernel time of a call), "total_s", "algorithm", "protocol", "kernel"}], the longest
    total first. bytes is nccl-tests' size (planner/system/collective.hpp): the all-reduce buffer, the whole
    gathered output, the whole scattered input, one rank's all-to-all send buffer, the message. The profiler
    copies a collective's metadata ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype",
    "Process Group Ranks") from its record_param_comms op onto its kernel (kineto libkineto/src/output_json.cpp,
    appendCollectiveArgs); a kernel without them is kept with "bytes": null (not fitted)."""
    groups = {}
    for e in trace_events:
        name = e.get("name", "")
        if e.get("cat") != "kernel" or not name.startswith("nccl"):
            continue
        args = e.get("args") or {}
        kind = _kernel_kind(name, args.get("Collective name"))
        if kind is None:
            continue
        size = DTYPE_BYTES.get(args.get("dtype"))
        nin, nout, group = args.get("In msg nelems"), args.get("Out msg nelems"), args.get("Group size")
        nbytes = None
        if size is not None and isinstance(nin, int) and isinstance(nout, int):
            nbytes = (nout if kind == "all_gather" else nin) * size
        ranks = group if isinstance(group, int) and group > 0 else layout.world_size
        nodes = _group_nodes(args, ranks, layout)
        algorithm, protocol = _algorithm(name)
        key = (kind, nbytes, ranks, nodes, args.get("dtype"))
        g = groups.setdefault(key, dict(seconds=[], algorithm=algorithm, protocol=protocol, kernel=name[:120]))
        g["seconds"].append(float(e.get("dur", 0)) / 1e6)  # microseconds
    rows = []
    for (kind, nbytes, ranks, nodes, dtype), g in groups.items():
        rows.append(dict(kind=kind, bytes=nbytes, ranks=ranks, nodes=nodes, dtype=dtype, calls=len(g["seconds"]),
                         seconds=statistics.median(g["seconds"]), total_s=sum(g["seconds"]),
                         algorithm=g["algorithm"], protocol=g["protocol"], kernel=g["kernel"]))
    rows.sort(key=lambda r: -r["total_s"])
    return rows


def trace_events(prof):
    """The chrome trace's events of a finished torch.profiler.profile."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="collect_hf_trace_")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f).get("traceEvents", [])
    finally:
        os.unlink(path)
