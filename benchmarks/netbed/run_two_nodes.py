"""The two-node bed: 2 ranks in each of two network namespaces, ``two_nodes.py``, RESULTS.

    sudo python benchmarks/netbed/run_two_nodes.py [--rate 1gbit] [--out benchmarks/netbed/TWO_NODES.md]

hydra's fork launcher is told the namespaces are two hosts (``-hosts mtnet0:2,mtnet1:2``),
so MPICH sees two nodes: shared memory between the 2 ranks of a namespace, TCP (libfabric
``tcp``) over the rate-limited veth pair between namespaces, and an MPI
``COMM_TYPE_SHARED`` split that tells mtensor which rank sits on which node.  The bed is
removed however the run ends.  Without root or iproute2 it prints "skipped: <reason>" and
exits 0.
"""
import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import netns  # noqa: E402
from run import ready, run_once  # noqa: E402

# flat algorithms of MPICH that do not follow the nodes, per launch (a ring crosses the link
# on every step; recursive doubling sends the whole buffer at each of its steps)
FLAT_ALGORITHMS = {
    "ring / ring / pairwise": ("ring", "ring", "pairwise"),
    "recursive doubling / recursive doubling / recursive halving":
        ("recursive_doubling", "recursive_doubling", "recursive_halving"),
}
CVARS = ("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "MPIR_CVAR_ALLGATHER_INTRA_ALGORITHM",
         "MPIR_CVAR_REDUCE_SCATTER_BLOCK_INTRA_ALGORITHM")
TITLES = {"all_reduce": "all-reduce", "all_gather": "all-gather",
          "reduce_scatter": "reduce-scatter"}


def _ms(seconds):
    return f"{1e3 * seconds:.1f}"


def report(res, rate, command) -> str:
    cfg, meg, ar = res["config"], res["megatron"], res["collectives"]
    t = meg["median_s"]
    lines = [
        "# Two nodes on one machine: tp inside vs across nodes, two-level all-reduce", "",
        f"Written by `{command}`.", "",
        f"4 ranks: 2 in network namespace `mtnet0`, 2 in `mtnet1`, hydra's fork launcher told "
        f"they are two hosts, so MPICH uses shared memory inside a namespace and TCP over a "
        f"veth pair limited to {rate} per direction (`tc tbf`) between them; mtensor sees the "
        f"nodes {ar['nodes']} (an MPI `COMM_TYPE_SHARED` split).  The machine has 2 cores: "
        f"the 4 ranks share them, so compute is slow and both layouts pay the same for it.  "
        f"Medians of interleaved reps, the slowest rank's, in ms.  Load average "
        f"before/after: {res['load'][0]:.1f}/{res['load'][1]:.1f}; the launch took "
        f"{res['seconds']:.0f} s.", "",
        f"Launch: `{res['launch']}`", "",
        "## Megatron MLP step: where the tp dim sits", "",
        f"Two blocks of `tanh(x @ A) @ B`, A column- and B row-parallel on tp, batch "
        f"{cfg['batch']} rows sharded on dp, d {cfg['d']}, hidden {4 * cfg['d']}, float32, "
        f"`mt.value_and_grad`; {cfg['reps']} reps.  Same mesh shape (2, 2) laid out by node; "
        f"only the names of its dims differ.", "",
        "| layout | mesh | eager | compiled |", "|---|---|---|---|"]
    for label in ("tp inside", "tp across"):
        lines.append(f"| {label} | `{meg['layouts'][label]}` | {_ms(t[label + ' eager'])} | "
                     f"{_ms(t[label + ' compiled'])} |")
    lines += ["", f"tp across / tp inside: eager "
              f"{t['tp across eager'] / t['tp inside eager']:.2f}x, compiled "
              f"{t['tp across compiled'] / t['tp inside compiled']:.2f}x (loss "
              f"{meg['loss']:.6f} on every side).", "",
              "## Collectives over the 4 ranks (float32, sum)", "",
              f"Flat: MPI's own collective (raw mpi4py: `Allreduce`, `Allgather`, "
              f"`Reduce_scatter_block`), and mtensor's `redistribute` (P -> R, S(0) -> R, "
              f"P -> S(0)) on a 1-D mesh told it is one node (backend "
              f"`{ar['backends']['mtensor flat']}`).  Two-level: the same on the real layout "
              f"(backend `{ar['backends']['mtensor two-level']}`, `comm/hierarchical.py`; "
              f"above the crossovers the default inter-node link gives: "
              + ", ".join(f"{TITLES[k]} {v / 1024:.0f} KiB"
                          for k, v in ar['backends']['crossover_bytes'].items())
              + f").  Sizes: the whole buffer (all-gather: the gathered one).  "
              f"{cfg['collective_reps']} reps.  One launch with MPICH's default algorithms "
              f"(the ch4 device picks, node-aware), and one per set of flat ones that do "
              f"not follow the nodes (`MPIR_CVAR_DEVICE_COLLECTIVES=none` and "
              f"{', '.join(f'`{c}`' for c in CVARS)} set; the two-level collectives then run "
              f"them on their smaller groups).", ""]
    for label, part in res["collectives_under"].items():
        for kind, table in part["median_s"].items():
            lines += [f"### {TITLES[kind]}, MPICH {label}", "",
                      "| MiB | raw mpi4py (flat) | mtensor flat | mtensor two-level | "
                      "raw / two-level |", "|---|---|---|---|---|"]
            for mib, row in table.items():
                raw, flat, two = (row[k] for k in ("raw mpi4py (flat)", "mtensor flat",
                                                   "mtensor two-level"))
                lines.append(f"| {mib} | {_ms(raw)} | {_ms(flat)} | {_ms(two)} | "
                             f"{raw / two:.2f} |")
            lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", default=netns.DEFAULT_RATE)
    ap.add_argument("--batch", default="4096")
    ap.add_argument("--d", default="256")
    ap.add_argument("--reps", default="10")
    ap.add_argument("--sizes", default="1,4,16,64")
    ap.add_argument("--kinds", default="all_reduce,all_gather,reduce_scatter")
    ap.add_argument("--collective-reps", default="5")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for the launch")
    ap.add_argument("--out", default=str(HERE / "TWO_NODES.md"))
    args = ap.parse_args(argv)
    command = ready("run_two_nodes.py", argv)
    if not command:
        return 0
    script = ["--batch", args.batch, "--d", args.d, "--reps", args.reps, "--sizes", args.sizes,
              "--kinds", args.kinds, "--collective-reps", args.collective_reps]
    load = os.getloadavg()[0]
    with netns.bed(args.rate):
        print(netns.describe(), flush=True)
        result = run_once(script, args.timeout, {}, script="two_nodes.py", per_node=2)
        result["collectives_under"] = {"default": result["collectives"]}
        for label, algorithms in FLAT_ALGORITHMS.items():
            env = {"MPIR_CVAR_DEVICE_COLLECTIVES": "none", **dict(zip(CVARS, algorithms))}
            again = run_once([*script, "--no-megatron"], args.timeout, env,
                             script="two_nodes.py", per_node=2)
            result["collectives_under"][label] = again["collectives"]
    result["load"] = (load, os.getloadavg()[0])
    text = report(result, args.rate, command)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
