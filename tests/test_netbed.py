"""The network test bed as a user runs it, at tiny sizes in one launch; where namespaces
cannot be made (no root, no iproute2, no privilege) it skips with the bed's own reason."""
import subprocess
import sys

import pytest
from launcher import ROOT


def run_bed(script, args, out, timeout):
    """The report ``benchmarks/netbed/<script> args --out out`` writes; skips with the bed's
    own reason where it cannot be made."""
    proc = subprocess.run([sys.executable, f"benchmarks/netbed/{script}", *args, "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    if proc.stdout.startswith("skipped:"):
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out.read_text()


def test_netbed_runs_or_says_why_not(tmp_path):
    text = run_bed("run.py", ["--reps", "2", "--caps", "1", "--layers", "2", "--d", "128",
                              "--batch", "64", "--no-async", "--timeout", "120", "--trace",
                              str(tmp_path / "trace.json")], tmp_path / "RESULTS.md", 300)
    assert "| bucket cap MB |" in text and "hidden compiled" in text
    assert (tmp_path / "trace.json").exists()


def test_two_node_bed_runs_or_says_why_not(tmp_path):
    text = run_bed("run_two_nodes.py", ["--batch", "64", "--d", "32", "--reps", "2", "--sizes",
                                         "1", "--collective-reps", "2", "--timeout", "120"],
                   tmp_path / "TWO_NODES.md", 600)
    assert "| tp inside |" in text and "| tp across |" in text
    assert "### all-gather, MPICH ring / ring / pairwise" in text and "mpi-hier" in text


def test_zero3_bed_runs_or_says_why_not(tmp_path):
    text = run_bed("run_zero3.py", ["--layers", "2", "--d", "32", "--batch", "1024", "--reps",
                                     "2", "--timeout", "240"], tmp_path / "ZERO3.md", 400)
    assert "| prefetch | 2 parameter gathers, prefetch" in text, text
    assert "| no prefetch, reshard | 3 parameter gathers, prefetch none" in text, text
