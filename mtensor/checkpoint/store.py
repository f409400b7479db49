"""The file side of checkpoints: zarr v3 arrays, fsync, and the commit by rename.

Every function here is local to one process (no MPI): ``api`` decides who calls what and
agrees on the outcome.  zarr is imported on first use, so ``import mtensor`` works without
it; the error says how to install it.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import secrets
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

from .layout import FORMAT, MARKER, chunk_indices, chunk_key, to_delete

MANIFEST = "mtensor_checkpoint"     # the root group's attribute that lists every leaf
RECORDS = ".records"                # in a background save's temp dir: each rank's record file


def zarr():
    try:
        import zarr as module
    except ImportError as e:   # pragma: no cover - depends on the environment
        raise ImportError("mtensor.checkpoint needs zarr>=3: pip install 'mtensor[checkpoint]'"
                          ) from e
    if int(module.__version__.split(".")[0]) < 3:
        raise ImportError(f"mtensor.checkpoint needs zarr>=3, found {module.__version__}")
    return module


def create_root(tmp: str, manifest: dict) -> None:
    """Rank 0: the temporary directory and the root group, whose attributes hold the
    manifest (every leaf, its metadata, scalars and the tree structure)."""
    z = zarr()
    os.makedirs(os.path.dirname(tmp) or ".", exist_ok=True)
    os.mkdir(tmp)                      # fails if it exists: two saves never share one
    z.open_group(z.storage.LocalStore(tmp), mode="w", attributes={MANIFEST: manifest})


def create_arrays(tmp: str, arrays) -> None:
    """One rank's share of the arrays' metadata (shape, dtype, chunks, per-leaf attributes;
    ``arrays`` is ``(name, manifest entry)`` pairs); the ranks split the leaves, so creating
    hundreds of arrays does not wait on rank 0 alone.

    Chunks are raw little-endian bytes followed by a CRC32C checksum: checkpoints of float
    weights barely compress, and the checksum turns a torn or flipped chunk into a read
    error instead of silently wrong weights.
    """
    if not arrays:
        return
    root = open_group(tmp, mode="r+")
    from zarr.codecs import Crc32cCodec
    for name, e in arrays:
        root.create_array(name, shape=tuple(e["shape"]), dtype=e["dtype"],
                          chunks=tuple(e["chunks"]), compressors=[Crc32cCodec()], attributes=e)


def open_group(path: str, mode: str = "r"):
    z = zarr()
    return z.open_group(z.storage.LocalStore(path, read_only=mode == "r"), mode=mode)


def write_region(group, name: str, region, block) -> None:
    """Write one rank's block.  The region is whole chunks (``layout.chunk_shape``), so no
    other rank touches these chunk files (even where zarr rewrites an edge chunk).  Every
    chunk is written, the ones equal to the fill value too: each chunk file then exists, so
    a missing one is always a lost one (``integrity``)."""
    group[name].with_config({"write_empty_chunks": True})[region] = block


def chunk_files(root: str, name: str, region, chunks):
    """``(key, file)`` of each chunk a region covers (zarr v3's default key encoding)."""
    for index in chunk_indices(region, chunks):
        key = chunk_key(index)
        yield key, os.path.join(root, name, *key.split("/"))


def chunk_digest(file: str):
    """The CRC32C that zarr's ``Crc32cCodec`` appended to a chunk file (its last 4 bytes, as
    hex), or None if the file does not exist: a digest of the chunk without reading it."""
    try:
        fd = os.open(file, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        return os.pread(fd, 4, max(os.fstat(fd).st_size - 4, 0)).hex()
    finally:
        os.close(fd)


def _fsync_one(p: str) -> None:
    try:
        fd = os.open(p, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync(paths) -> None:
    """Flush files (and directories) to stable storage; missing ones are skipped.  Several
    at once from a few threads (fsync releases the GIL): the file system can then commit
    them in one journal transaction instead of one per file."""
    paths = list(paths)
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(paths)))) as pool:
        list(pool.map(_fsync_one, paths))


def record_file(tmp: str, rank: int) -> str:
    return os.path.join(tmp, RECORDS, f"rank-{rank:05d}.json")


def write_record(tmp: str, rank: int, content: dict) -> None:
    """A background save: this rank's outcome for rank 0 (its chunks' digests, or its
    error), written whole under a temporary name and renamed, so a reader never sees half."""
    file = record_file(tmp, rank)
    os.makedirs(os.path.dirname(file), exist_ok=True)
    part = f"{file}.part-{secrets.token_hex(3)}"
    with open(part, "w") as f:
        json.dump(content, f)
    os.rename(part, file)


def missing_records(tmp: str, size: int) -> list:
    """The ranks whose record file is not there yet (one directory listing)."""
    try:
        present = set(os.listdir(os.path.join(tmp, RECORDS)))
    except FileNotFoundError:
        present = set()
    return [r for r in range(size) if os.path.basename(record_file(tmp, r)) not in present]


def take_records(tmp: str, size: int) -> list:
    """Every rank's record, in rank order; the folder is then removed, so the committed
    directory holds only the checkpoint."""
    records = []
    for r in range(size):
        with open(record_file(tmp, r)) as f:
            records.append(json.load(f))
    shutil.rmtree(os.path.join(tmp, RECORDS))
    return records


def metadata_files(tmp: str):
    """Rank 0's files to flush at commit: every ``zarr.json`` and every directory (their
    entries name the chunk files other ranks created)."""
    for dirpath, _, files in os.walk(tmp):
        yield dirpath
        yield from (os.path.join(dirpath, f) for f in files if f == "zarr.json")


def _exchange(a: str, b: str) -> bool:
    """Swap two directories in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``);
    False where the OS or file system has no such call."""
    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if call(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def publish(tmp: str, path: str) -> str:
    """Make ``tmp`` be ``path``; returns where the previous ``path`` now is (to delete), or
    ''.  An existing ``path`` is swapped with ``tmp`` atomically where the OS can (readers
    see the old or the new checkpoint, never none).  Elsewhere it is moved aside to
    ``path.old-*`` first (a directory cannot be renamed over a non-empty one) and put back
    if the second rename fails; a crash between the two leaves no ``path`` but a committed
    ``path.old-*``, which ``load``'s error names."""
    if not os.path.lexists(path):
        os.rename(tmp, path)
        return ""
    if _exchange(tmp, path):
        return tmp
    old = f"{path}.old-{secrets.token_hex(3)}"
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        raise
    return old


def commit(tmp: str, path: str, keep, durable: bool, chunks: dict) -> None:
    """Rank 0, after every rank's data is written: mark ``tmp`` complete (the marker records
    ``chunks``, every leaf's chunk digests: what this save wrote), publish it as
    ``path``, then delete the previous one, leftovers of interrupted saves of ``path``
    (``path.tmp-*``, ``path.old-*``) and, with ``keep``, old numbered siblings.

    ``COMMITTED`` is written (and flushed) inside ``tmp`` before the rename, so the rename
    publishes a complete directory and nothing without the marker is ever loaded.
    """
    if durable:                        # every rank's files are written: flush the tree
        fsync(metadata_files(tmp))
    with open(os.path.join(tmp, MARKER), "w") as f:
        json.dump({"time": time.time(), "format": FORMAT, "chunks": chunks}, f)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    if durable:
        fsync([tmp])
    old = publish(tmp, path)
    parent, base = os.path.split(path)
    if durable:
        fsync([parent])
    if old:
        shutil.rmtree(old, ignore_errors=True)
    for entry in os.listdir(parent):
        if entry.startswith((base + ".tmp-", base + ".old-")):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
    if keep is not None:
        committed = [e for e in os.listdir(parent)
                     if os.path.isfile(os.path.join(parent, e, MARKER))]
        for entry in to_delete(base, committed, keep):
            shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)


def open_checkpoint(path: str):
    """``(group, manifest, chunks)`` of a committed checkpoint (``chunks``: the digests of
    every chunk the save wrote; None for a checkpoint of format 1, which has none), or an
    error that says what is wrong with ``path`` (missing, not committed, not a checkpoint)."""
    if not os.path.exists(path):
        parent, base = os.path.split(path)
        try:
            near = sorted(e for e in os.listdir(parent or ".")
                          if e.startswith((base + ".tmp-", base + ".old-")))
        except OSError:
            near = []
        hint = (f"; found {', '.join(near)} beside it, left by an interrupted save "
                f"(a committed one holds a {MARKER} file and can be renamed to {base})"
                if near else "")
        raise FileNotFoundError(f"no checkpoint at {path}: the path does not exist{hint}")
    if not os.path.isdir(path):
        raise NotADirectoryError(f"{path} is not a checkpoint directory")
    if not os.path.isfile(os.path.join(path, MARKER)):
        raise RuntimeError(f"{path} is not a committed checkpoint (no {MARKER} marker): a save "
                           f"that was interrupted or is still running; load the previous one")
    try:
        with open(os.path.join(path, MARKER)) as f:
            marker = json.load(f)
    except ValueError as e:
        raise RuntimeError(f"{path}: the {MARKER} marker is not readable JSON ({e}): the "
                           f"checkpoint is damaged; load another one") from None
    group = open_group(path)
    manifest = group.attrs.get(MANIFEST)
    if manifest is None:
        raise RuntimeError(f"{path} is a zarr group but not an mtensor checkpoint "
                           f"(no {MANIFEST!r} attribute)")
    return group, manifest, marker.get("chunks")
