"""A pytest plugin for running the array API standard's test suite (data-apis/array-api-tests)
against ``mtensor.array_api`` under mpiexec: every rank must draw the same examples, so
hypothesis is derandomized, keeps no example database, has no deadline and runs no health
checks (they time the machine, and ranks would diverge); ``MTENSOR_SPLIT_BYTES=n`` lowers
the size from which new arrays are split by rows (0: every array with a row per rank is
split, so the suite's small arrays exercise the distributed paths).  docs/guide/array_api.md
has the commands.
"""
import os

import pytest
from hypothesis import HealthCheck, settings


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    settings.register_profile(
        "mtensor-lockstep", parent=settings.get_profile("array-api-tests"), derandomize=True,
        database=None, deadline=None, suppress_health_check=list(HealthCheck),
        print_blob=False)
    settings.load_profile("mtensor-lockstep")


def pytest_sessionstart(session):
    if os.environ.get("MTENSOR_SPLIT_BYTES") is not None:
        import mtensor.array_api as xp
        xp.split_bytes(int(os.environ["MTENSOR_SPLIT_BYTES"]))
