"""Placements hash alike in every process: a set or dict of them iterates in one order on
every rank (Python salts str hashes per process, so a hash built from a name would not;
the sharding search once indexed choices built from such a set, rank by rank)."""
import subprocess
import sys

CODE = ("from mtensor.placement import Partial, Replicate, Shard; "
        "print([hash(p) for p in (Shard(0), Shard(3), Replicate(), Partial(), Partial('max'))],"
        " list({Shard(1), Replicate(), Partial(), Shard(0), Partial('min')}))")


def test_hashes_and_set_order_do_not_depend_on_the_process():
    seen = {subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed}).stdout
            for seed in ("1", "2", "3")}
    assert len(seen) == 1, seen
