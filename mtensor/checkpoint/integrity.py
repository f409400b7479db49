"""Which chunks a save wrote, and the check that a load reads exactly those.

A chunk file that a partial copy lost reads as zarr's fill value (zeros) and one copied in
from another save reads as that save's data: wrong weights either way, and zarr raises no
error.  So each writing rank records, per leaf, the CRC32C that zarr's checksum codec
appended to every chunk file it wrote; rank 0 commits the pooled record in the ``COMMITTED``
marker, the file written last.  A load compares each chunk it is about to read with that
record (missing, unrecorded or different: ``CheckpointError`` naming the leaf and the
chunk), and zarr checks the chunk's bytes against the same CRC as it decodes them, so what
is read is what this save wrote.  Cost: one 4-byte read per chunk file, at save and at load.
"""
from __future__ import annotations

from . import store
from .agree import CheckpointError
from .layout import MARKER


def written(root: str, name: str, region, chunks) -> dict:
    """``{chunk key: digest}`` of the chunk files this rank just wrote for ``region``."""
    out = {}
    for key, file in store.chunk_files(root, name, region, chunks):
        out[key] = store.chunk_digest(file)
        if out[key] is None:
            raise RuntimeError(f"chunk {key} of {name} was written but {file} does not exist")
    return out


def verify(root: str, name: str, where: str, region, chunks, record) -> None:
    """Refuse a chunk of ``region`` that is missing or not the one the save recorded
    (``record``: the marker's digests; None for format 1 checkpoints, which have none)."""
    if record is None:
        return
    wrote = record.get(name, {})
    for key, file in store.chunk_files(root, name, region, chunks):
        want, got = wrote.get(key), store.chunk_digest(file)
        if want is None:
            raise CheckpointError(
                f"leaf {where}: chunk {key} (file {file}) is not in the save's record (the "
                f"{MARKER} marker): the checkpoint's metadata is damaged; load another one")
        if got is None:
            raise CheckpointError(
                f"leaf {where}: chunk {key} is missing (file {file} does not exist): the "
                f"checkpoint is incomplete (a partial copy or a deleted file); copy it again "
                f"whole or load another checkpoint")
        if got != want:
            raise CheckpointError(
                f"leaf {where}: chunk {key} (file {file}) is not the one this save wrote (its "
                f"CRC32C is {got}, the save recorded {want}): a chunk of another save or a "
                f"rewritten file; copy the checkpoint again whole or load another one")
