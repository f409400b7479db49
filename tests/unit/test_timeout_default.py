"""The collective timeout is on by default (600 s, as NCCL's watchdog); MTENSOR_TIMEOUT
changes it and 0 turns it off.  Read in a fresh interpreter: the setting is taken at import."""
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("value, want", [(None, "600.0"), ("45", "45.0"), ("0", "None")])
def test_timeout_default_and_overrides(value, want):
    env = {k: v for k, v in os.environ.items() if k != "MTENSOR_TIMEOUT"}
    if value is not None:
        env["MTENSOR_TIMEOUT"] = value
    out = subprocess.run([sys.executable, "-c", "import mtensor.comm.guard as g, mtensor; "
                          "print(g.state.timeout)"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == want
