"""benchmarks/run.py runs end to end at tiny sizes, with torch and with torch hidden."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from launcher import finish

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ["## 1. Collectives", "## 2. Dispatch overhead", "## 3. Training step",
            "## 4. Scaling", "## 5. numpy's algorithms and scikit-learn on split arrays",
            "| scikit-learn PCA covariance_eigh (1024 x 8 float64) |",
            "## 6. mt.compile, guards, writes, checkpoints", "### mt.compile", "How to reproduce",
            "- mt.compile, data-parallel step", "- guards, 2 ranks", "- writes, 2 ranks",
            "- checkpoint, 2 ranks, 2 MiB", "- GPT step (lm), 2 ranks (1, 2): mtensor",
            "### Byte-level GPT step", "## 7. Overlap on a rate-limited link"]


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def run_quick(out, **env):
    proc = subprocess.Popen(
        [sys.executable, "benchmarks/run.py", "--ranks", "2", "--quick", "--out", str(out),
         "--timeout", "60"],
        cwd=ROOT, env=dict(os.environ, **env), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True)
    stdout, _ = finish(proc, 100, "benchmarks/run.py --quick")
    assert proc.returncode == 0, stdout[-10000:]
    return (out / "RESULTS.md").read_text()


@pytest.mark.parametrize("hide_torch", [False, True], ids=["torch-if-installed", "no-torch"])
def test_run_quick_writes_results_and_plots(tmp_path, hide_torch):
    if not hide_torch and importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: the no-torch run is this run")
    env = {"MTENSOR_BENCH_NO_TORCH": "1"} if hide_torch else {}
    text = run_quick(tmp_path, **env)
    for heading in SECTIONS:
        assert heading in text, heading
    if _has_matplotlib():  # plots need the bench extra
        assert list((tmp_path / "plots").glob("*.png"))
    assert "FAILED" not in text
    if hide_torch:  # every torch column is n/a, never a number
        assert "gloo: n/a" in text
        assert "| x + y | " in text and text.split("| x + y |")[1].split("\n")[0].count("n/a") >= 4
