"""The mtensor side of the step benchmarks: one forward+backward through
``mt.value_and_grad``, eager or through ``mt.compile``, reading the loss as a float."""
import mtensor as mt


def mtensor_side(loss, args, compiled=False):
    """() -> (loss as a float, gradient DTensors) of ``loss(*args)``."""
    step = mt.value_and_grad(loss)
    if compiled:
        step = mt.compile(step)

    def run():
        value, grads = step(*args)
        return float(value), grads
    return run
