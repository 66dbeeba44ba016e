"""torch.profiler as tests/scripts/fake_torch needs it: a profile whose events are two overlapping kernels,
one more kernel, a memcpy and a CPU op (so the collector's sums can be checked: 25 us busy, 30 us summed)."""
import types

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

    def events(self):
        return [_Event("gemm", 0, 10, "cuda"), _Event("softmax", 5, 15, "cuda"), _Event("adam", 20, 30, "cuda"),
                _Event("Memcpy HtoD", 30, 31, "cuda"), _Event("aten::mm", 0, 100, "cpu")]
