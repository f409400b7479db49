"""Distributed checkpoints on zarr v3: ``save(path, state)`` and ``load(path, like=template)``.

Every rank writes the chunks of its own block in parallel (no gather), into a temporary
directory that becomes ``path`` by one rename after all ranks finished and rank 0 wrote the
``COMMITTED`` marker; a load reads only the chunks that overlap each rank's target block,
so a checkpoint saved on N ranks loads on any mesh and placements.  Errors are agreed
across ranks and raised on every rank.  zarr (``pip install 'mtensor[checkpoint]'``) is
imported at the first save or load, not with mtensor.

- ``layout``: pure decisions (leaf names, chunk grid, who writes, rotation);
- ``store``: zarr and file operations of one process (create, write, commit, open);
- ``api``: ``save``/``load`` and the agreement between ranks.
"""
from .api import CheckpointError, load, save

__all__ = ["CheckpointError", "load", "save"]
