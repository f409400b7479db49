"""One command: the network test bed, zero3.py on it, the bed torn down, ZERO3.md written.

    sudo python benchmarks/netbed/run_zero3.py [--rate 1gbit] [--reps 10]

The bed is ``run.py``'s (two network namespaces, MPICH over TCP on a rate-limited veth
pair); without root or iproute2 it prints "skipped: <reason>" and exits 0.
"""
import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import netns  # noqa: E402
from run import ready, run_once  # noqa: E402


def report(res, rate, command) -> str:
    cfg = res["config"]
    load = "/".join(f"{a:.1f}" for a in (res["loadavg_before"][0], res["loadavg_after"][0]))
    lines = [
        "# ZeRO-3 parameter prefetch on a rate-limited link (network test bed)", "",
        f"Written by `{command}`.", "",
        f"2 ranks in network namespaces, MPICH over TCP on a veth pair limited to {rate} per "
        f"direction; one BLAS thread per rank on a 2-core machine.  Workload: "
        f"{cfg['layers']} tanh layers of {cfg['d']}x{cfg['d']} float32 weights laid out "
        f"`Shard(0)` over the 2 ranks (ZeRO-3), global batch {cfg['batch']} split too; "
        f"`mt.value_and_grad` + `mt.optim.sgd`, compiled with `overlap=True`.  "
        f"{cfg['reps']} interleaved reps; load average before/after {load}; calibrated link "
        f"behind compute {res['calibrated']['overlap_rate']:.2f}.", "",
        "waiting: the replay's own time in instructions that wait on or run a parameter "
        "gather (median over reps, the larger rank's); t_comm: blocking mpi4py `Allgather` of "
        "the same gathers, alone; hidden = 1 - waiting / t_comm; predicted: `mt.explain`'s "
        "(1 - the model's waits on the gathers / their transfer times).  Every side's losses "
        f"equal the eager step's ({', '.join(f'{v:.6f}' for v in res['loss'])}).", "",
        f"Launch: `{res['launch']}`", "",
        "| side | what mt.compile did | step ms | gathers | t_comm ms | waiting ms | hidden | "
        "predicted | off |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in res["rows"].items():
        lines.append(f"| {name} | {r['prefetch']} | {1e3 * r['step_s']:.0f} | {r['gathers']} | "
                     f"{1e3 * r['comm_s']:.0f} | {1e3 * r['wait_s']:.0f} | "
                     f"{100 * r['hidden']:.0f}% | {100 * r['predicted']:.0f}% | "
                     f"{100 * (r['hidden'] - r['predicted']):+.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", default=netns.DEFAULT_RATE)
    ap.add_argument("--layers", default="8")
    ap.add_argument("--d", default="768")
    ap.add_argument("--batch", default="4096")
    ap.add_argument("--reps", default="10")
    ap.add_argument("--timeout", type=int, default=900, help="seconds for the launch")
    ap.add_argument("--out", default=str(HERE / "ZERO3.md"))
    args = ap.parse_args(argv)
    command = ready("run_zero3.py", argv)
    if not command:
        return 0
    script = ["--layers", args.layers, "--d", args.d, "--batch", args.batch,
              "--reps", args.reps]
    with netns.bed(args.rate):
        print(netns.describe(), flush=True)
        result = run_once(script, args.timeout, {}, script="zero3.py")
    result["loadavg_before"] = result.get("loadavg_before", os.getloadavg())
    text = report(result, args.rate, command)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
