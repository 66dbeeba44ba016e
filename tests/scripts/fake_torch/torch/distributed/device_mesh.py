"""torch.distributed.device_mesh.init_device_mesh: a mesh that records its shape."""
import torch.distributed as dist


class DeviceMesh:
    def __init__(self, device_type, shape):
        self.device_type, self.shape = device_type, tuple(shape)

    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n


def init_device_mesh(device_type, mesh_shape, mesh_dim_names=None):
    if not dist.is_initialized():
        raise RuntimeError("init_device_mesh before init_process_group")
    if tuple(mesh_shape) != (dist.get_world_size(),):
        raise RuntimeError("mesh {} over a world of {}".format(tuple(mesh_shape), dist.get_world_size()))
    dist._log("init_device_mesh", device_type=device_type, shape=list(mesh_shape))
    return DeviceMesh(device_type, mesh_shape)
