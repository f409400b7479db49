"""Distributed checkpoints on zarr v3: ``save(path, state)`` and ``load(path, like=template)``.

Every rank writes the chunks of its own block in parallel (no gather), into a temporary
directory that becomes ``path`` by one rename after all ranks finished and rank 0 wrote the
``COMMITTED`` marker, which records the digest of every chunk written; a load reads only
the chunks that overlap each rank's target block, and refuses any that is missing or not
the one recorded, so a checkpoint saved on N ranks loads on any mesh and placements, and
never as silently wrong weights.  Errors are agreed across ranks and raised on every rank.
zarr (``pip install 'mtensor[checkpoint]'``) is imported at the first save or load, not
with mtensor.

- ``layout``: pure decisions (leaf names, chunk grid, who writes, scalars, rotation);
- ``store``: zarr and file operations of one process (create, write, commit, open);
- ``integrity``: the record of the chunks a save wrote, and the check before reading;
- ``agree``: ``CheckpointError`` and the agreement between ranks;
- ``save``, ``load``: who writes and reads what;
- ``background``: ``save(..., blocking=False)``, its thread and its ``SaveHandle``.
"""
from .agree import CheckpointError
from .background import SaveHandle
from .load import load
from .save import save

__all__ = ["CheckpointError", "SaveHandle", "load", "save"]
