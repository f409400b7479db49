"""Writes into DTensors, each keeping the target's layout: item assignment (``setitem``),
the in-place operators, ``out=`` and ``ufunc.at`` (``inplace``), and numpy's writing
functions ``copyto``, ``put``, ``place``, ``putmask``, ``fill_diagonal`` (``put``)."""
