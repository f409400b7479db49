"""mtensor: eager distributed tensors over MPI, in the spirit of PyTorch's DTensor."""
from .debug import CommDebugMode
from .dtensor import DTensor, distribute_tensor
from .mesh import DeviceMesh, init_device_mesh
from .placement import Partial, Replicate, Shard

__all__ = [
    "CommDebugMode",
    "DTensor",
    "DeviceMesh",
    "Partial",
    "Replicate",
    "Shard",
    "distribute_tensor",
    "init_device_mesh",
]
__version__ = "0.1.0"
