"""Pure decisions of the checkpoint format: leaf names, chunk grids, who writes, scalars,
tree structure and rotation.  No MPI, no zarr, no file system: every rank computes the same
answers from shapes and names alone, which is what lets ranks write in parallel without
talking to each other, and what the unit tests check without mpiexec.
"""
from __future__ import annotations

import itertools
import math
import re
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import quote

import optree

from ..placement import Shard, local_bounds, mesh_coords, reduced
from ..pytree import NAMESPACE

FORMAT = 2                    # 2: Python numbers as 0-d arrays, per-chunk digests in MARKER
MARKER = "COMMITTED"          # written last, by rank 0: a directory without it is refused;
                              # its JSON records every chunk the save wrote (load checks them)
MAX_CHUNK_BYTES = 16 << 20    # why: zarr reads whole chunks; smaller chunks cut the read
                              # amplification of loading into another layout


# ---- leaf names ---------------------------------------------------------------------------

def leaf_paths(tree) -> Tuple[list, List[tuple]]:
    """``(leaves, paths)`` in mtensor's leaf order (``pytree.flatten``), each path the keys
    and indices from the root, so save and a template load name leaves alike."""
    paths, leaves, _ = optree.tree_flatten_with_path(tree, none_is_leaf=True,
                                                     namespace=NAMESPACE)
    return leaves, [tuple(p) for p in paths]


def _escape(key) -> str:
    if key == "":
        return "%"              # quote never makes a lone "%", so this cannot collide
    text = quote(str(key), safe="").replace(".", "%2E")
    return "%5F" + text[1:] if text.startswith("_") else text   # zarr reserves "__..."


def leaf_name(path: Sequence) -> str:
    """The zarr array name of the leaf at ``path``: keys joined by ``.``, each percent-escaped
    (so ``{"opt": [w, b]}`` names ``opt.0`` and ``opt.1``; a bare leaf is ``_root``)."""
    return ".".join(_escape(k) for k in path) if path else "_root"


def path_text(path: Sequence) -> str:
    """A path as users write it, for error messages: ``['opt'][0]``."""
    return "".join(f"[{k!r}]" for k in path) or "<root>"


def stored_path_text(entry: dict) -> str:
    """``path_text`` of a manifest entry (its path is stored as the keys' reprs)."""
    return "".join(f"[{k}]" for k in entry["path"]) or "<root>"


def unique_names(paths: Iterable[Sequence]) -> List[str]:
    """Leaf names, refusing two leaves that would share one (e.g. keys ``1`` and ``"1"``)."""
    names, seen = [], {}
    for path in paths:
        name = leaf_name(path)
        if name in seen:
            raise ValueError(f"leaves {path_text(seen[name])} and {path_text(path)} map to the "
                             f"same stored name {name!r}; rename one key")
        seen[name] = path
        names.append(name)
    return names


# ---- chunk grid ---------------------------------------------------------------------------

def split_points(shape, mesh_shape, placements) -> List[List[int]]:
    """Per tensor dim, the interior offsets where one rank's block ends and another's begins
    (Partial counts as Replicate: partial leaves are reduced before they are written)."""
    placements = reduced(placements)
    points = [set() for _ in shape]
    for coord in mesh_coords(tuple(mesh_shape)):
        for d, (lo, hi) in enumerate(local_bounds(shape, mesh_shape, placements, coord)):
            points[d].update(x for x in (lo, hi) if 0 < x < shape[d])
    return [sorted(p) for p in points]


def _smallest_factor(n: int) -> int:
    for f in range(2, math.isqrt(n) + 1):
        if n % f == 0:
            return f
    return n


def chunk_shape(shape, itemsize: int, points, max_bytes: int = MAX_CHUNK_BYTES) -> Tuple[int, ...]:
    """The regular chunk grid that makes every block a whole number of chunks.

    Along a split dim the chunk is the gcd of the split points (array_split pieces of 8 rows
    on 4 ranks: 2; 7 rows on 4 ranks, pieces 2,2,2,1: 2; 7 rows on 3 ranks, 3,2,2: 1), so
    no chunk straddles two writers and no two ranks ever write one file.  The last chunk may
    overhang the array's end (zarr allows it), so the size itself need not divide.  Unsplit
    dims take the whole extent.  Chunks over ``max_bytes`` are cut: a split dim only by a
    divisor (keeping the alignment), an unsplit dim by halving; the largest extent first.
    """
    chunks = [math.gcd(*p) if p else max(int(s), 1) for s, p in zip(shape, points)]
    chunks = [max(c, 1) for c in chunks]
    while math.prod(chunks) * itemsize > max_bytes and max(chunks, default=1) > 1:
        d = max(range(len(chunks)), key=lambda i: chunks[i])
        c = chunks[d]
        chunks[d] = c // _smallest_factor(c) if points[d] else (c + 1) // 2
    return tuple(chunks)


def chunk_indices(region, chunks) -> List[Tuple[int, ...]]:
    """The grid indices of the chunks that a region (a tuple of slices) overlaps."""
    return list(itertools.product(*(range(s.start // c, -(-s.stop // c))
                                    for s, c in zip(region, chunks))))


def chunk_key(index) -> str:
    """A chunk's key in zarr v3's default encoding, relative to its array: ``c/1/0``
    (``c`` for a 0-d array); also its file's path below the array's directory."""
    return "/".join(["c", *map(str, index)])


def writes_block(placements, coord) -> bool:
    """Whether the rank at ``coord`` writes its block: a block replicated over mesh dims (R,
    or Partial once reduced) is written once, by the rank at coordinate 0 of those dims."""
    return all(isinstance(p, Shard) or c == 0 for p, c in zip(reduced(placements), coord))


def placement_strings(placements) -> List[str]:
    return [repr(p) for p in placements]


# ---- scalars and structure ----------------------------------------------------------------

SCALAR_TYPES = (bool, int, float, str, type(None))
_INT64 = range(-2 ** 63, 2 ** 63)


def number_dtype(value) -> Optional[str]:
    """The dtype of the 0-d array that stores a Python number (bool, int in int64's range,
    float), so a plain zarr reader sees a number; None for the scalars kept in the manifest
    (str, None, larger ints)."""
    if isinstance(value, bool):
        return "|b1"
    if isinstance(value, int):
        return "<i8" if value in _INT64 else None
    return "<f8" if isinstance(value, float) else None


def from_number(block, kind: str):
    """The Python number a 0-d array stored (``kind``: the manifest's "bool"/"int"/"float")."""
    return {"bool": bool, "int": int, "float": float}[kind](block[()])


def encode_scalar(value) -> dict:
    """A Python scalar as JSON that decodes to the same value bit for bit (floats as hex:
    JSON has no NaN, inf or -0.0 it can be trusted with)."""
    if value is None:
        return {"type": "none"}
    if isinstance(value, bool):
        return {"type": "bool", "value": value}
    if isinstance(value, int):
        return {"type": "int", "value": str(value)}      # str: JSON readers clip big ints
    if isinstance(value, float):
        return {"type": "float", "value": value.hex()}
    if isinstance(value, str):
        return {"type": "str", "value": value}
    raise TypeError(f"not a scalar: {type(value).__name__}")


def decode_scalar(entry: dict):
    kind = entry["type"]
    if kind == "none":
        return None
    if kind == "float":
        return float.fromhex(entry["value"])
    return {"bool": bool, "int": int, "str": str}[kind](entry["value"])


def encode_structure(tree, names: Iterator) -> dict:
    """The containers of ``tree`` as JSON, leaves as their names, for ``load(path)`` without
    a template.  dict-like nodes come back as dicts, list/deque as lists, tuples (named too)
    as tuples; any other registered node as a dict keyed by its entries' text."""
    if optree.tree_is_leaf(tree, none_is_leaf=True, namespace=NAMESPACE):
        return {"leaf": next(names)}
    children, _, entries, _ = optree.tree_flatten_one_level(tree, none_is_leaf=True,
                                                            namespace=NAMESPACE)
    subs = [encode_structure(c, names) for c in children]
    if isinstance(tree, dict):
        return {"dict": [[encode_scalar(k) if isinstance(k, SCALAR_TYPES) else
                          encode_scalar(repr(k)), s] for k, s in zip(entries, subs)]}
    if isinstance(tree, tuple):
        return {"tuple": subs}
    if isinstance(tree, list) or type(tree).__name__ == "deque":
        return {"list": subs}
    return {"dict": [[encode_scalar(str(k)), s] for k, s in zip(entries, subs)]}


def decode_structure(node: dict, values: Dict[str, object]):
    """Rebuild the tree of ``encode_structure`` with each leaf name replaced by its value."""
    if "leaf" in node:
        return values[node["leaf"]]
    if "dict" in node:
        return {decode_scalar(k): decode_structure(s, values) for k, s in node["dict"]}
    subs = [decode_structure(s, values) for s in node.get("tuple", node.get("list"))]
    return tuple(subs) if "tuple" in node else subs


# ---- rotation -----------------------------------------------------------------------------

_NUMBERED = re.compile(r"(.*?)(\d+)")


def step_prefix(name: str) -> Optional[str]:
    """``"step-00010"`` -> ``"step-"``; None when the name does not end with a number."""
    m = _NUMBERED.fullmatch(name)
    return m.group(1) if m else None


def to_delete(name: str, siblings: Iterable[str], keep: int) -> List[str]:
    """Which committed ``siblings`` (names in the same directory) ``keep=N`` removes after
    saving ``name``: all with its prefix and a number, except the N highest numbers (the
    newest steps) and ``name`` itself, which a save never deletes."""
    prefix = step_prefix(name)
    if prefix is None:
        raise ValueError(f"keep= needs a path ending with a step number (e.g. run/step-00010); "
                         f"got {name!r}")
    pattern = re.compile(re.escape(prefix) + r"(\d+)")
    numbered = [(int(m.group(1)), s) for s in siblings if (m := pattern.fullmatch(s))]
    numbered.sort(reverse=True)
    return sorted(s for _, s in numbered[keep:] if s != name)
