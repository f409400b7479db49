"""benchmarks/autoshard.py runs at tiny sizes: the search alone, and the planned step against
the hand-annotated one under mpiexec (same bytes)."""
import re
import subprocess
import sys

from launcher import ROOT, run_under_mpi


def test_search_only_runs_and_reports_the_layouts():
    out = subprocess.run([sys.executable, "benchmarks/autoshard.py", "--search-only",
                          "--blocks", "3", "--reps", "1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "Megatron layouts on every block:" in out.stdout, out.stdout


def test_the_planned_step_moves_the_hand_annotated_bytes():
    result = run_under_mpi(4, ["benchmarks/autoshard.py", "--blocks", "1", "--d", "32",
                               "--hidden", "128", "--batch", "128", "--reps", "2"], timeout=300)
    assert result.returncode == 0, result.stdout
    moved = re.search(r"bytes per rank auto ([0-9,]+), hand ([0-9,]+)", result.stdout)
    assert moved and moved[1] == moved[2], result.stdout
