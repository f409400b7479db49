"""Reverse-mode gradients of DTensor programs: ``tape`` (what dispatch records), ``vjps``
(the gradient rules), ``api`` (``mt.value_and_grad``, ``mt.grad``)."""
