"""One command: set up the network test bed, run overlap.py on it, tear it down, write RESULTS.md.

    sudo python benchmarks/netbed/run.py [--rate 1gbit] [--reps 10] [--out benchmarks/netbed/RESULTS.md]

Why a separate runner: the two ranks must live in two network namespaces (``netns.py``) and
MPICH must talk TCP over the veth link between them, which takes a hydra MPMD launch with a
per-rank ``FI_TCP_IFACE`` and ``ip netns exec``.  overlap.py runs twice, with MPICH's default
progress (mtensor polls ``Testall`` between compute nodes) and with
``MPIR_CVAR_ASYNC_PROGRESS=1`` (a progress thread per rank).  The namespaces are removed
however the run ends (``finally``; SIGTERM and SIGHUP are turned into exceptions).  Without
root or iproute2 it prints "skipped: <reason>" and exits 0.
"""
import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import netns  # noqa: E402

MPI_ENV = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "MPIR_CVAR_NOLOCAL": "1",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else "mpiexec"


def launch_command(script, script_args, timeout, per_node=1):
    """timeout ... mpiexec <ranks in mtnet0> : <ranks in mtnet1> (hydra MPMD).

    ``per_node`` > 1: hydra's fork launcher is told the namespaces are two hosts of
    ``per_node`` slots each, so MPICH puts them on two nodes (shared memory inside a
    namespace, the netmod between them) without ``MPIR_CVAR_NOLOCAL``."""
    cmd = ["timeout", "-k", "10", str(timeout), mpiexec()]
    if per_node > 1:
        cmd += ["-launcher", "fork", "-hosts",
                ",".join(f"{ns}:{per_node}" for ns in netns.NAMESPACES)]
    for i, (ns, dev) in enumerate(zip(netns.NAMESPACES, netns.IFACES)):
        if i:
            cmd.append(":")
        cmd += ["-n", str(per_node), "-env", "FI_TCP_IFACE", dev, "ip", "netns", "exec", ns,
                sys.executable, str(HERE / script), *script_args]
    return cmd


def run_once(script_args, timeout, extra_env, script="overlap.py", per_node=1):
    """Launch ``script`` on the bed; the JSON its rank 0 writes, plus the launch line."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = launch_command(script, [*script_args, "--json", str(out)], timeout, per_node)
        base = MPI_ENV if per_node == 1 else {k: v for k, v in MPI_ENV.items()
                                              if k != "MPIR_CVAR_NOLOCAL"}
        env = dict(os.environ, **base, **extra_env)
        shown = " ".join(f"{k}={v}" for k, v in {**base, **extra_env}.items())
        print(f"[netbed] {shown} {shlex.join(cmd)}", flush=True)
        proc = subprocess.Popen(cmd, env=env, start_new_session=True)
        try:
            proc.wait()
        except BaseException:      # Ctrl-C, SIGTERM: take every rank down before the bed
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            raise
        if proc.returncode != 0:
            raise RuntimeError(f"{script} launch failed with exit status {proc.returncode}"
                               + (" (timed out)" if proc.returncode in (124, 137) else ""))
        result = json.loads(out.read_text())
        result["launch"] = f"{shown} {shlex.join(cmd)}".replace(tmp, "$TMP")
        return result


def _ms(t):
    return f"{1e3 * t['median']:.0f} [{1e3 * t['min']:.0f}-{1e3 * t['max']:.0f}]"


def report(results, rate, command) -> str:
    first = results[0]
    cfg = first["config"]
    lines = [
        "# Overlap on a rate-limited link (network test bed)", "",
        f"Written by `{command}`.", "",
        f"2 ranks in network namespaces `mtnet0`/`mtnet1`, MPICH over TCP (libfabric `tcp`) on a "
        f"veth pair limited to {rate} per direction by `tc tbf`; one BLAS thread per rank on a "
        f"2-core machine.  Workload: {cfg['layers']} tanh layers of {cfg['d']}x{cfg['d']} "
        f"float32 ({cfg['grad_mb']:.0f} MiB of gradients), global batch {cfg['batch']} sharded "
        f"over the 2 ranks, `mt.value_and_grad` + `mt.optim.sgd`.  Times: median [min-max] of "
        f"{cfg['reps']} interleaved reps, the slower rank's, in ms.", "",
        "hidden = 1 - (t_step - t_compute) / t_comm, where t_compute is the same step on each "
        "rank's half batch over a 1-rank mesh on COMM_SELF (compiled for compiled/blocking, "
        "eager for eager) and t_comm is blocking mpi4py Allreduce calls of the compiled step's "
        "bucket sizes.  It also charges the step for waiting on the slower rank at each "
        "blocking collective (the compute baseline runs each rank alone), hence `hidden "
        "blocking` < 0.  saved by overlap = (t_blocking - t_compiled) / t_comm: the same "
        "buckets with and without overlap.  Hidden is from median times, in brackets from min times (the least "
        "disturbed rep: the machine is shared).  `predicted` is `mt.explain`'s estimate after "
        "`mt.calibrate(mesh, repeats=25)` on the link (the README's \"What mt.explain "
        "predicts\"), with compute timed in rank 0's latest replays; `off` is hidden compiled "
        "minus predicted, in points.  `paired` is the median over reps of each rep's own hidden"
        " share (the compiled step against the compute-alone run of the same rep: slow drifts "
        "of the shared machine cancel).  `waiting` is the median time a compiled replay spends "
        "outside its compute nodes (starting, waiting, blocking: read from the replay's own "
        "spans during the timed reps, the larger rank's), and `hidden by waits` = 1 - waiting /"
        " t_comm: the same share without the noisy compute-alone baseline (it does not charge "
        "the step for compute slowed by transfers); its `predicted` is 1 - the model's summed "
        "waits / communication.  The last bucket has no compute left to hide behind (the "
        "optimizer step waits for it), so at most 1 - last bucket / all buckets can be "
        "hidden.", "",
    ]
    for res in results:
        t, h = res["times"], res["hidden"]
        label = ("MPIR_CVAR_ASYNC_PROGRESS=1 (MPICH progress thread)"
                 if res["config"]["async_progress"] == "1"
                 else "default progress (mtensor polls Testall between compute nodes)")
        load = "/".join(f"{a:.1f}" for a in res["loadavg_before"][:1] + res["loadavg_after"][:1])
        lines += [f"## {label}", "",
                  f"Raw 16 MiB Allreduce: {1e3 * res['raw_allreduce_16mib_s']:.0f} ms.  "
                  f"Step compute alone: compiled {_ms(t['compute_compiled'])}, eager "
                  f"{_ms(t['compute_eager'])}; eager step {_ms(t['eager'])}.  "
                  f"Load average before/after: {load}.  Calibrated link: alpha "
                  f"{1e6 * res['calibrated']['alpha_s']:.0f} us, beta "
                  f"{res['calibrated']['beta_bytes_per_s'] / 1e6:.0f} MB/s, link speed behind compute "
                  f"{res['calibrated']['overlap_rate']:.2f}, compute slowdown "
                  f"{res['calibrated']['overlap_slowdown']:.2f}.", "",
                  f"Launch: `{res['launch']}`", "",
                  "| bucket cap MB | buckets (MiB) | t_comm | t_compiled | t_blocking | "
                  "hidden compiled | paired | predicted | off | "
                  "waiting | hidden by waits | predicted | off | hidden blocking | saved by overlap | hidden eager |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        split = "; ".join(
            f"{k}: " + ", ".join(f"rank {r} {c:.0f} ms compute + {o:.0f} ms other"
                                 for r, (c, o) in enumerate(v))
            for k, v in res["busy_split"].items())
        for cap, sizes in res["buckets"].items():
            mib = "+".join(f"{b / 2**20:.0f}" for b in sizes)
            pct = lambda key: (f"{100 * h[key]:.0f}% ({100 * res['hidden_from_min'][key]:.0f}%)")  # noqa: E731
            off = h[f"compiled[{cap}]"] - res["predicted"][cap]
            waits = res["hidden_by_waits"][cap] - res["predicted_by_waits"][cap]
            lines.append(
                f"| {cap} | {mib} | {_ms(t[f'comm[{cap}]'])} | {_ms(t[f'compiled[{cap}]'])} | "
                f"{_ms(t[f'blocking[{cap}]'])} | {pct(f'compiled[{cap}]')} | "
                f"{100 * res['hidden_paired'][cap]:.0f}% | {100 * res['predicted'][cap]:.0f}% | "
                f"{100 * off:+.0f} | {1e3 * res['waiting'][cap]:.0f} | "
                f"{100 * res['hidden_by_waits'][cap]:.0f}% | "
                f"{100 * res['predicted_by_waits'][cap]:.0f}% | {100 * waits:+.0f} | "
                f"{pct(f'blocking[{cap}]')} | {pct(f'saved[{cap}]')} | "
                f"{pct(f'eager (vs comm[{cap}])')} |")
        lines += ["", f"Inside the replay (medians of 5, from the spans `export_trace` writes): {split}.",
                  ""]
    return "\n".join(lines)


def _raise_on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def ready(script: str, argv) -> str:
    """The command line to report for ``benchmarks/netbed/<script>``, once the bed can be
    made and SIGTERM/SIGHUP tear it down like Ctrl-C; "" (after printing "skipped:
    <reason>") where it cannot."""
    reason = netns.unavailable()
    if reason:
        print(f"skipped: {reason}")
        return ""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_on_signal)
    given = argv if argv is not None else sys.argv[1:]
    return f"python benchmarks/netbed/{script} {shlex.join(given)}".strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", default=netns.DEFAULT_RATE)
    ap.add_argument("--reps", default="30")
    ap.add_argument("--caps", default="auto,1,2,4,8,25")
    ap.add_argument("--layers", default="8")
    ap.add_argument("--d", default="1024")
    ap.add_argument("--batch", default="1536")
    ap.add_argument("--no-async", action="store_true", help="skip the progress-thread run")
    ap.add_argument("--trace", default="/tmp/mtensor_netbed_trace.json",
                    help="Chrome trace of one compiled replay (not committed)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per launch")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args(argv)
    command = ready("run.py", argv)
    if not command:
        return 0
    script = ["--reps", args.reps, "--caps", args.caps, "--layers", args.layers, "--d", args.d,
              "--batch", args.batch]
    results = []
    with netns.bed(args.rate):
        print(netns.describe(), flush=True)
        results.append(run_once([*script, "--trace", args.trace], args.timeout, {}))
        if not args.no_async:
            results.append(run_once(script, args.timeout, {"MPIR_CVAR_ASYNC_PROGRESS": "1"}))
    text = report(results, args.rate, command)
    text += f"\nA Chrome trace of one compiled replay (first cap, default progress): `{args.trace}`.\n"
    text += ("\nTwo nodes of 2 ranks (tp inside vs across nodes, two-level collectives): "
             "`TWO_NODES.md`, written by `run_two_nodes.py`; the same step with twice the batch "
             "(the ceiling of hidden communication on this bed): `RESULTS_batch3072.md`.\n")
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
