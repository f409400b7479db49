"""Started collectives of the device backends: a ``Started`` holds its parts (mpi4py
requests, or NCCL completion events wrapped alike) and what to do once they complete (copy a
staged result back to the device, put NaN back), so every device backend waits and polls
the same way, whatever mix of requests the replay holds."""
from __future__ import annotations


class Started:
    """One started collective: ``parts`` answer ``Wait()`` and ``Test()``; ``finish`` runs
    once, when the last part has completed."""

    __slots__ = ("parts", "finish")

    def __init__(self, parts, finish=None):
        self.parts, self.finish = list(parts), finish


def wait(request: Started) -> None:
    for part in request.parts:
        part.Wait()
    if request.finish is not None:
        request.finish()
        request.finish = None


def test_all(requests) -> bool:
    """Advance every request once (MPI progresses only inside MPI calls); True when all are
    done.  Nothing is finished here: ``wait`` does that, in the replay's order."""
    done = True
    for request in requests:
        for part in request.parts:
            done = part.Test() and done
    return done
