"""A stand-in for the parts of torch that scripts/collect_hf.py calls, for testing the collector's own
logic on a machine without torch or a GPU: every call it makes exists, tensors carry shapes and dtypes but
no data, the allocator statistics are plausible integers, and the autograd graph has a few nodes with saved
tensors. Nothing here imitates what PyTorch computes. FAKE_TORCH_OOM=forward makes every forward run out
of memory."""
import contextlib
import itertools
import os
import types

__version__ = "0.0-fake"


class dtype:
    def __init__(self, name, size):
        self.name, self.size = name, size

    def __str__(self):
        return "torch." + self.name


float32, bfloat16, float16, int64 = dtype("float32", 4), dtype("bfloat16", 2), dtype("float16", 2), dtype("int64", 8)
long = int64


class device:
    def __init__(self, kind, index=0):
        self.kind, self.index = kind, index

    def __str__(self):
        return "{}:{}".format(self.kind, self.index)


_pointers = itertools.count(1 << 20, 1 << 12)


class _Storage:
    def __init__(self, nbytes):
        self._ptr, self._nbytes = next(_pointers), nbytes

    def data_ptr(self):
        return self._ptr

    def nbytes(self):
        return self._nbytes


class Tensor:
    def __init__(self, shape, dt=float32, grad_fn=None, dev="cuda:0"):
        self.shape, self.dtype, self.grad_fn, self.device = tuple(shape), dt, grad_fn, dev
        self.requires_grad = False
        self._storage = _Storage(self.numel() * dt.size)

    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self):
        return self.dtype.size

    def untyped_storage(self):
        return self._storage

    def detach(self):
        return Tensor(self.shape, self.dtype)

    def __truediv__(self, other):
        return Tensor(self.shape, self.dtype, self.grad_fn)

    def __mul__(self, other):
        return Tensor(self.shape, self.dtype, self.grad_fn)

    def __float__(self):
        return 1.0

    def backward(self):
        cuda._allocate(self.numel())


class _Node:
    def __init__(node, name, next_nodes=(), **saved):  # noqa: N805 ("self" is a saved-tensor name: mm's self)
        node._name, node.next_functions = name, tuple((n, 0) for n in next_nodes)
        for k, v in saved.items():
            setattr(node, "_saved_" + k, v)

    def name(self):
        return self._name


class OutOfMemoryError(RuntimeError):
    pass


class _Cuda(types.ModuleType):
    OutOfMemoryError = OutOfMemoryError

    def __init__(self):
        super().__init__("torch.cuda")
        self._allocated = self._peak = 0
        self._reserved = self._reserved_peak = 0

    def _allocate(self, n):
        self._allocated += n
        self._peak = max(self._peak, self._allocated)
        self._reserved = max(self._reserved, (self._allocated + (2 << 20) - 1) // (2 << 20) * (2 << 20))
        self._reserved_peak = max(self._reserved_peak, self._reserved)

    def is_available(self):
        return True

    def device_count(self):
        return 1

    def get_device_name(self, index=0):
        return "Fake GPU"

    def init(self):
        pass

    def set_device(self, dev):
        pass

    def synchronize(self):
        pass

    def empty_cache(self):
        self._reserved = self._allocated

    def mem_get_info(self):
        return 80 << 30, 81 << 30

    def memory_allocated(self):
        return self._allocated

    def max_memory_allocated(self):
        return self._peak

    def memory_reserved(self):
        return self._reserved

    def max_memory_reserved(self):
        return self._reserved_peak

    def reset_peak_memory_stats(self):
        self._peak, self._reserved_peak = self._allocated, self._reserved

    def memory_stats(self):
        # The counters collect_hf.py reads (the real dict has many more keys): one cudaMalloc a 2 MiB step.
        return {"num_device_alloc": self._reserved_peak // (2 << 20), "num_device_free": 0, "num_alloc_retries": 0,
                "num_ooms": 0, "allocated_bytes.all.current": self._allocated}

    def memory_snapshot(self):
        # Summing to what is reserved, as a real allocator's segments do.
        return [{"segment_type": "large", "total_size": self._reserved - (2 << 20)}, {"segment_type": "small", "total_size": 2 << 20}]


class _CudaMemory:
    """torch.cuda.memory's private history API: what the collector calls, with the real signatures' names."""

    def __init__(self):
        self.recording = False
        self.labels = []  # each _set_memory_metadata while recording: one event carries it in the dump

    def _record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=0):
        self.recording = enabled is not None

    def _set_memory_metadata(self, metadata):
        if self.recording:
            self.labels.append(metadata)

    def _dump_snapshot(self, filename):
        import pickle
        trace = [{"action": "alloc", "size": 512, "user_metadata": label} for label in self.labels] or [{"action": "alloc", "size": 512}]
        with open(filename, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [trace] if self.recording else [[]]}, f)


cuda = _Cuda()
cuda.memory = _CudaMemory()
version = types.SimpleNamespace(cuda="0.0")
backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(is_available=lambda: True, version=lambda: 1))
autograd = types.SimpleNamespace(DeviceType=types.SimpleNamespace(CPU="cpu", CUDA="cuda"))


def manual_seed(seed):
    pass


def randint(low, high, shape, device=None):
    return Tensor(shape, int64)


def tensor(data, dtype=None, device=None):  # nested lists of numbers: their shape
    shape, d = [], data
    while isinstance(d, list):
        shape.append(len(d))
        d = d[0] if d else None
    out = Tensor(tuple(shape), dtype or int64)
    out.data = data
    return out


def autocast(device_type, dtype=None):
    return contextlib.nullcontext()


class _Parameter(Tensor):
    def __init__(self, shape):
        super().__init__(shape)
        self.requires_grad = True


class _Optimizer:
    def __init__(self, params, lr=1e-3, foreach=None, fused=None):
        self.params = list(params)

    def step(self):
        cuda._allocate(sum(p.numel() for p in self.params))

    def zero_grad(self, set_to_none=True):
        pass


class _GradScaler:
    def __init__(self, device="cuda"):
        pass

    def scale(self, loss):
        return loss

    def step(self, optimizer):
        optimizer.step()

    def update(self):
        pass

    def get_scale(self):
        return 65536.0


optim = types.SimpleNamespace(AdamW=_Optimizer)
amp = types.SimpleNamespace(GradScaler=_GradScaler)


class _Module:
    """A named module: its own parameters and its children's (attributes), as nn.Module.parameters() yields them."""

    def __init__(self, name, params=(), **children):
        self._name, self._own = name, list(params)
        for k, v in children.items():
            setattr(self, k, v)
        self._children = list(children.values())

    def parameters(self):
        yield from self._own
        for c in self._children:
            yield from c.parameters()


def _layer(name, h, gpt2):
    """A decoder layer as transformers names its modules: GPT-2's attn.c_attn/c_proj and mlp.c_fc/c_proj, the
    others' self_attn.{q,k,v,o}_proj and mlp.{gate,up,down}_proj; each a (h, h) or (h, 4h) weight in the fake."""
    if gpt2:
        attn = _Module(name + ".attn", [_Parameter((h, 4 * h))])
        return _Module(name, attn=attn, mlp=_Module(name + ".mlp"))
    proj = lambda n, shape: _Module(name + "." + n, [_Parameter(shape)])  # noqa: E731
    attn = _Module(name + ".self_attn", q_proj=proj("self_attn.q_proj", (h, h)), k_proj=proj("self_attn.k_proj", (h, h)),
                   v_proj=proj("self_attn.v_proj", (h, h)), o_proj=proj("self_attn.o_proj", (h, h)))
    attn.num_heads = 16
    mlp = _Module(name + ".mlp", gate_proj=proj("mlp.gate_proj", (h, h)), up_proj=proj("mlp.up_proj", (h, h)),
                  down_proj=proj("mlp.down_proj", (h, h)))
    return _Module(name, self_attn=attn, mlp=mlp)


class _FakeModel:
    """What the collector asks of a model: parameters, buffers, moves, checkpointing, its decoder layers by
    transformers' names (model.layers; GPT-2: transformer.h) and a forward whose loss has an autograd graph (a
    cuDNN attention node for sdpa, bmm/softmax nodes for eager)."""

    def __init__(self, config):
        self.config = config
        h, V, L = config.hidden, config.vocab_size, config.layers
        gpt2 = hasattr(config, "n_layer")
        layers = [_layer(("transformer.h." if gpt2 else "model.layers.") + str(i), h, gpt2) for i in range(L)]
        embedding = _Parameter((V, h))
        if gpt2:
            self.transformer = types.SimpleNamespace(h=layers)
        else:
            self.model = types.SimpleNamespace(layers=layers)
        self._name = "root"
        self._params = [embedding] + [p for layer in layers for p in layer.parameters()]
        self._buffers = [Tensor((1, 1))]

    def parameters(self):
        return iter(self._params)

    def buffers(self):
        return iter(self._buffers)

    def to(self, what):
        return self

    def train(self):
        return self

    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):
        self.gc = True

    def enable_input_require_grads(self):
        pass

    def compile(self):  # nn.Module.compile: in place
        self.compiled = True

    def __call__(self, input_ids, labels, position_ids=None):
        if position_ids is not None and position_ids.shape != input_ids.shape:  # transformers would fail
            raise ValueError("position_ids {} do not match input_ids {}".format(position_ids.shape, input_ids.shape))
        if os.environ.get("FAKE_TORCH_OOM") == "forward":  # the collector's out-of-memory path
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (fake)")
        b, s = input_ids.shape
        h, heads = self.config.hidden, self.config.heads
        q = Tensor((b, heads, s, h // heads), bfloat16)
        if self.config._attn_implementation == "sdpa":
            attention = _Node("ScaledDotProductCudnnAttentionBackward0", query=q, key=q, value=q, logsumexp=Tensor((b, heads, s)))
        else:
            attention = _Node("BmmBackward0", (_Node("SoftmaxBackward0", result=Tensor((b, heads, s, s))),), self=q)
        logits = Tensor((b, s, self.config.vocab_size))
        cuda._allocate(logits.numel() * 4)
        head = _Node("MmBackward0", (attention,), self=Tensor((b * s, h)), mat2=self._params[0])
        loss = Tensor((), float32, _Node("NllLossBackward0", (_Node("LogSoftmaxBackward0", (head,), result=logits),)))
        return types.SimpleNamespace(loss=loss, logits=logits)
