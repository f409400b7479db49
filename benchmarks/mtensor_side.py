"""What the step benchmarks share: their (dp, tp) mesh, and the mtensor side, one
forward+backward through ``mt.value_and_grad``, eager or through ``mt.compile``, reading the
loss as a float."""
import mtensor as mt


def step_mesh(n):
    """(2, n/2) = (dp, tp) where n is even and above 2, else (1, n)."""
    return mt.init_device_mesh((2, n // 2) if n % 2 == 0 and n > 2 else (1, n),
                               mesh_dim_names=("dp", "tp"))


def mtensor_side(loss, args, compiled=False):
    """() -> (loss as a float, gradient DTensors) of ``loss(*args)``."""
    step = mt.value_and_grad(loss)
    if compiled:
        step = mt.compile(step)

    def run():
        value, grads = step(*args)
        return float(value), grads
    return run
