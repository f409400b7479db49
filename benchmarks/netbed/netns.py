"""Two network namespaces joined by a rate-limited veth pair: a "network" on one machine.

Why: in shared memory the cores that compute also copy the message, so communication can
never hide behind compute and an overlap benchmark shows ~0%.  Over a veth link the kernel
moves the bytes, and a ``tbf`` rate limit makes the transfer take wall-clock time the way a
real NIC does, so what ``mt.compile`` overlaps becomes measurable.

    python benchmarks/netbed/netns.py up [--rate 1gbit]   # make mtnet0 <-> mtnet1
    python benchmarks/netbed/netns.py down                # remove them

Layout: namespace ``mtnet0`` holds ``veth0`` = 10.77.0.1/24, ``mtnet1`` holds ``veth1`` =
10.77.0.2/24, loopback up in both, a ``tbf`` qdisc on the egress of both ends.  Nothing is
routed out of the namespaces.  ``up`` removes leftovers of an earlier run first; ``bed()``
is a context manager that always tears down.  Without root or without ``ip``/``tc``, ``up``
prints "skipped: <reason>" and exits 0.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import time

NAMESPACES = ("mtnet0", "mtnet1")
IFACES = ("veth0", "veth1")
ADDRESSES = ("10.77.0.1", "10.77.0.2")
DEFAULT_RATE = "1gbit"


def unavailable():
    """Why namespaces cannot be made here (None: they can)."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces need Linux, not {sys.platform}"
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"no `{tool}` command (iproute2)"
    probe = _run("ip", "netns", "add", "mtnet-probe", check=False)
    _run("ip", "netns", "del", "mtnet-probe", check=False)
    if probe.returncode != 0:   # e.g. a container without CAP_SYS_ADMIN
        return f"cannot make a network namespace here: {probe.stderr.strip()}"
    return None


def _run(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def down() -> None:
    """Remove both namespaces (deleting a namespace deletes the veth end inside it)."""
    for ns in NAMESPACES:
        _run("ip", "netns", "del", ns, check=False)
    _run("ip", "link", "del", IFACES[0], check=False)   # a half-made pair in the root netns


def up(rate: str = DEFAULT_RATE, burst: str = "128kb", latency: str = "100ms") -> None:
    """Make the two namespaces, the veth pair and the rate limit (after removing leftovers).

    ``burst`` is what the link sends at full veth speed after an idle gap: it must hold one
    64 KiB GSO packet, and more would let spaced-out all-reduces (eager's, between compute)
    run faster than back-to-back ones (the comm-only baseline): 512kb made eager look ~15%
    "hidden"."""
    down()
    try:
        for ns in NAMESPACES:
            _run("ip", "netns", "add", ns)
            # IPv4 only: right after creation a tentative IPv6 address made libfabric's tcp
            # provider hang or fail in MPI_Init ("ep_enable failed ... Bad file descriptor")
            _run("ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                 "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        _run("ip", "link", "add", IFACES[0], "netns", NAMESPACES[0],
             "type", "veth", "peer", "name", IFACES[1], "netns", NAMESPACES[1])
        for ns, dev, addr in zip(NAMESPACES, IFACES, ADDRESSES):
            ns_ip = ("ip", "netns", "exec", ns)
            _run(*ns_ip, "ip", "link", "set", "lo", "up")
            _run(*ns_ip, "ip", "addr", "add", f"{addr}/24", "dev", dev)
            _run(*ns_ip, "ip", "link", "set", dev, "up")
            _run(*ns_ip, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
                 "burst", burst, "latency", latency)
        _wait_carrier()
    except subprocess.CalledProcessError as e:
        down()
        raise RuntimeError(f"netns: `{' '.join(e.cmd)}` failed: {e.stderr.strip()}") from None


def _wait_carrier(seconds: float = 5.0) -> None:
    """Return once both veth ends report LOWER_UP (the link carries traffic)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        states = [_run("ip", "netns", "exec", ns, "ip", "link", "show", dev).stdout
                  for ns, dev in zip(NAMESPACES, IFACES)]
        if all("LOWER_UP" in s for s in states):
            return
        time.sleep(0.05)
    raise RuntimeError(f"netns: the veth pair did not come up within {seconds:g} s")


def describe() -> str:
    lines = []
    for ns, dev in zip(NAMESPACES, IFACES):
        out = _run("ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev, check=False)
        lines.append(f"{ns}/{dev}: {out.stdout.strip() or out.stderr.strip()}")
    return "\n".join(lines)


@contextlib.contextmanager
def bed(rate: str = DEFAULT_RATE):
    """The test bed for the duration of a ``with`` block; torn down however it ends."""
    up(rate)
    try:
        yield
    finally:
        down()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=("up", "down", "show"))
    parser.add_argument("--rate", default=DEFAULT_RATE, help="tbf rate per direction")
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason:
        print(f"skipped: {reason}")
        return 0
    if args.action == "up":
        up(args.rate)
        print(describe())
    elif args.action == "down":
        down()
    else:
        print(describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
