"""RESULTS.md and the plots from what benchmarks/run.py collected (see run.py)."""
import datetime
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

from redistribute_vs_mpi4py import size_label

SIDES_TRAIN = ("mtensor", "hand", "DTensor")
HEAT_NOTE = ("Heat: not benchmarked. `pip install --dry-run heat` resolves heat 1.8.0, which "
             "requires torch<2.11.1 and would replace the pinned torch 2.13.0+cpu with 2.11.0 "
             "(plus CUDA wheels), so it was not installed; its column reads n/a.")


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine():
    """Lines describing the machine and the software versions."""
    import mpi4py

    mpi4py.rc.initialize = False  # the library version needs no MPI_Init
    from mpi4py import MPI

    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                  if ln.startswith("model name")), platform.processor() or "?") \
        if os.path.exists("/proc/cpuinfo") else platform.processor() or "?"
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    torch = _version("torch")
    if torch and os.environ.get("MTENSOR_BENCH_NO_TORCH"):
        torch += " installed but hidden (MTENSOR_BENCH_NO_TORCH=1): torch sides skipped"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = ""
    return [
        f"CPU: {os.cpu_count()} logical cores ({model}); RAM: {ram:.1f} GiB",
        f"OS: {platform.platform()}",
        f"python {platform.python_version()}, numpy {_version('numpy')}, "
        f"mpi4py {_version('mpi4py')}, MPI: {' '.join(MPI.Get_library_version().split()[:3])}",
        f"torch: {torch or 'not installed: torch sides skipped'}; "
        f"heat: {_version('heat') or 'not installed'}; "
        f"matplotlib: {_version('matplotlib') or 'not installed: no plots'}",
        f"mtensor commit {commit or '?'}; "
        f"date {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
    ]


def us(t):
    return f"{t * 1e6:.1f}" if t else "n/a"


def ms(t):
    return f"{t * 1e3:.2f}" if t else "n/a"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "n/a"


def gbs(b):
    return f"{b / 1e9:.2f}" if b else "n/a"


def collectives_md(res, gloo_res):
    out = ["## 1. Collectives", "",
           "mtensor `redistribute` (P->R all-reduce, S(0)->R all-gather, P->S(0) reduce-scatter, "
           "S(0)->S(1) all-to-all) vs the same collective in raw mpi4py on preallocated buffers "
           "vs torch.distributed over gloo on the same numpy buffers; float32, S = the full "
           "tensor. Median microseconds per call (each call after a barrier, sides rotating, "
           "slowest rank) and bus bandwidth in GB/s (nccl-tests: all-reduce 2(n-1)/n S/t, "
           "the others (n-1)/n S/t, S/n per rank for all-to-all).", "",
           "Two launches per rank count: mtensor vs mpi4py without torch loaded, and all three "
           "sides interleaved in a second launch (its mtensor time is the *gloo run* column, "
           "the base of mt / gloo). With gloo's threads in the processes the MPI sides run "
           "up to 2-4x slower on small buffers on this 2-core machine, so the first launch "
           "gives the cleaner mtensor-vs-MPI ratio.", ""]
    for n, r in res.items():
        if not r:
            out += [f"### {n} ranks: failed (see the notes at the end)", ""]
            continue
        g = {(row["kind"], row["bytes"]): row for row in (gloo_res.get(n) or {}).get("rows", [])}
        out += [f"### {n} ranks", "", "| collective | size | mtensor us | mpi4py us | "
                "mt / mpi4py | busbw mt | busbw mpi4py | gloo run: mtensor us | gloo us | "
                "mt / gloo | busbw gloo |", "|---|" + "---:|" * 10]
        for row in r["rows"]:
            grow = g.get((row["kind"], row["bytes"]), {})
            out.append(f"| {row['kind']} | {size_label(row['bytes'])} | {us(row['mtensor'])} | "
                       f"{us(row['mpi4py'])} | {ratio(row['mtensor'], row['mpi4py'])} | "
                       f"{gbs(row['busbw_mtensor'])} | {gbs(row['busbw_mpi4py'])} | "
                       f"{us(grow.get('mtensor'))} | {us(grow.get('gloo'))} | "
                       f"{ratio(grow.get('mtensor'), grow.get('gloo'))} | "
                       f"{gbs(grow.get('busbw_gloo'))} |")
        if not g:
            out.append("\ngloo: n/a (torch not importable or hidden).")
        out.append("")
    return out


def dispatch_md(res):
    out = ["## 2. Dispatch overhead", ""]
    if not res:
        return out + ["failed (see the notes at the end)", ""]
    out += [f"{res['ranks']} ranks, float64, 64x64 block per rank unless named, one thread per "
            "rank; microseconds per op (median of per-batch means, slowest rank), added = minus "
            "numpy on the local block. Heat: n/a (see the notes).", "",
            "| op | numpy | mtensor | mt added | DTensor | DT added | torch local | Heat |",
            "|---|" + "---:|" * 7]
    for label, (t_np, t_mt, t_th, t_dt) in res["table"].items():
        add = lambda t: f"{(t - t_np) * 1e6:+.1f}" if t else "n/a"  # noqa: E731
        out.append(f"| {label} | {us(t_np)} | {us(t_mt)} | {add(t_mt)} | {us(t_dt)} | "
                   f"{add(t_dt)} | {us(t_th)} | n/a |")
    return out + [""]


def train_rows(runs):
    rows = []
    for n, r in runs.items():
        if not r:
            rows.append(f"| {n} | failed | | | | | | | |")
            continue
        m = r["median_s"]
        losses = list(r["losses"].values())
        rows.append(f"| {n} | {tuple(r['mesh'])} | {r['batch']} | {ms(m['mtensor'])} | "
                    f"{ms(m.get('compiled'))} | {ms(m.get('DTensor'))} | {ms(m['hand'])} | "
                    f"{ratio(m['mtensor'], m['hand'])} | {ratio(m['mtensor'], m.get('DTensor'))} "
                    f"| {max(losses) - min(losses):.1e} |")
    return rows


TRAIN_HEAD = ["| ranks | mesh (dp, tp) | global batch | mtensor eager ms | mtensor compiled ms | "
              "DTensor ms | hand ms | mt / hand | mt / DTensor | loss spread |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]


def train_md(results):
    runs = {n: results["strong"][n] for n in results["ranks"]}
    d = next((r["d"] for r in runs.values() if r), "?")
    clean = ["", "The same step, mtensor vs hand only, in a launch without torch (gloo's threads "
             "share the cores with the MPI ranks and slow them unevenly):", "",
             "| ranks | mtensor eager ms | hand ms | mt / hand |", "|---:|---:|---:|---:|"]
    for n, r in results["train_no_torch"].items():
        m = (r or {}).get("median_s", {})
        clean.append(f"| {n} | {ms(m.get('mtensor'))} | {ms(m.get('hand'))} | "
                     f"{ratio(m.get('mtensor'), m.get('hand'))} |")
    return ["## 3. Training step", "",
            f"Forward+backward of a two-block Megatron MLP (d {d}, hidden 4d, float64): X "
            "Shard(0) on dp / Replicate on tp, A column-parallel Shard(1) and B row-parallel "
            "Shard(0) on tp, Replicate on dp; loss ((h - t)**2).mean(). mtensor "
            "`value_and_grad`; hand-written numpy+mpi4py (Megatron's collectives); PyTorch "
            "DTensor over gloo (`loss.backward()`, each gradient redistributed to its "
            "parameter's placements). Sides in a random order each rep, one launch; median ms, "
            "slowest rank. "
            "Loss spread: max - min of the three losses.", "", *TRAIN_HEAD,
            *train_rows(runs), ""]


def scaling_md(results):
    cores = os.cpu_count()
    out = ["## 4. Scaling", "",
           f"**This machine has {cores} cores**: runs with more than {cores} ranks are "
           "oversubscribed (ranks share cores), so their times measure contention more than "
           "scaling. Mesh (1, n) up to 2 ranks, (2, n/2) above. Strong: fixed global batch. "
           "Weak: fixed batch per dp rank (dp = 1 runs are shared with the strong table, so "
           "at 2 ranks, mesh (1, 2), tp halves the work and the 'efficiency' exceeds 1). "
           "Speedup / efficiency = the 1-rank time of the same side over this one.", ""]
    for kind, title in (("strong", "Strong scaling"), ("weak", "Weak scaling")):
        runs = results[kind]
        one = (runs.get(1) or {}).get("median_s", {})
        out += [f"### {title}", "", *TRAIN_HEAD, *train_rows(runs), "",
                "| ranks | " + " | ".join(f"{s} {'speedup' if kind == 'strong' else 'eff.'}"
                                         for s in SIDES_TRAIN) + " |", "|---:|---:|---:|---:|"]
        for n, r in runs.items():
            m = (r or {}).get("median_s", {})
            out.append(f"| {n} | " + " | ".join(ratio(one.get(s), m.get(s)) for s in SIDES_TRAIN)
                       + " |")
        out.append("")
    return out


def algorithms_md(results):
    """The algorithms' rows, then scikit-learn's PCA (``sklearn_pca.py``), per rank count."""
    sklearn = results.get("sklearn", {})
    runs = {n: None if r is None and sklearn.get(n) is None else
            {"rows": (r or {"rows": []})["rows"] + (sklearn.get(n) or {"rows": []})["rows"]}
            for n, r in results["algorithms"].items()}
    cases = max((r["rows"] for r in runs.values() if r), key=len, default=[])
    out = ["## 5. numpy's algorithms and scikit-learn on split arrays", "",
           "Each array split Shard(0) over every rank (sample sort; local scans and an "
           "all-gather of one total per block; a halo of one value per block; TSQR; "
           "scikit-learn's PCA, unchanged, on row-split DTensors) against numpy (scikit-learn "
           "on numpy) on the whole array in one process, in the same launch (the other ranks "
           "sleep while numpy runs). Ratio = one-process time / distributed time (above 1: "
           "distributed is faster); medians, slowest rank. Above "
           f"{os.cpu_count()} ranks the ranks share the cores.", "",
           "| case | " + " | ".join(f"{n} ranks" for n in runs) + " |",
           "|---|" + "---:|" * len(runs)]
    for i, case in enumerate(cases):
        cells = []
        for r in runs.values():
            row = r["rows"][i] if r and i < len(r["rows"]) else None
            cells.append("failed" if row is None else
                         f"{row['ratio']:.2f} ({ms(row['numpy_s'])} / {ms(row['mtensor_s'])} ms)"
                         + ("" if row["correct"] else " WRONG"))
        out.append(f"| {case['case']} | " + " | ".join(cells) + " |")
    return out + [""]


MORE = [("compile", "mt.compile: a data-parallel step with many small gradients, and the "
                    "replay's cost per op (`compile_dp.py`)"),
        ("guards", "What the reliability guards add per collective (`guards_cost.py`)"),
        ("writes", "Writes to a DTensor vs numpy on the local block (`writes.py`)"),
        ("checkpoint", "Checkpoints: save and load throughput (`checkpoint.py`)"),
        ("checkpoint_large", "A larger checkpoint at the smallest rank count (`checkpoint.py`)"),
        ("lm", "Byte-level GPT step (examples/lm_model.py): mtensor eager and compiled vs the "
               "hand-written Megatron step (`lm_step_vs_handwritten.py`, torch absent)"),
        ("lm_torch", "The same with the PyTorch DTensor side (`lm_step_vs_handwritten.py`)")]


def more_md(results):
    out = ["## 6. mt.compile, guards, writes, checkpoints, the GPT step", ""]
    for key, title in MORE:
        out += [f"### {title}", ""]
        for n, r in results[key].items():
            out += (r["lines"] if r else [f"{n} ranks: failed (see the notes at the end)"]) + [""]
    out += ["## 7. Overlap on a rate-limited link (`netbed/run.py`)", ""]
    if results.get("netbed"):
        out += ["2 ranks in two network namespaces over a 1 Gbit veth link; the full report "
                "is [netbed/RESULTS.md](netbed/RESULTS.md).", "", *results["netbed"], ""]
    else:
        out += ["Not run here (`python benchmarks/run.py --netbed`, as root); the last "
                "report is [netbed/RESULTS.md](netbed/RESULTS.md).", ""]
    return out


def more_headlines(results):
    numbers = {key: {n: r["numbers"] for n, r in results[key].items() if r}
               for key, _ in MORE}
    out = []
    compiled = numbers["compile"]
    if compiled:
        out.append("- mt.compile, data-parallel step with small gradients: eager / compiled "
                   + ", ".join(f"{c['dp_s']['eager'] / c['dp_s']['compiled']:.1f}x at {n} ranks "
                               f"({c['collectives']['eager']} collectives -> "
                               f"{c['collectives']['compiled']})" for n, c in compiled.items())
                   + "; replay +" + ", ".join(f"{c['per_op_us']['compiled']:.1f}"
                                              for c in compiled.values())
                   + " us/op over numpy (eager dispatch +" + ", ".join(
                       f"{c['per_op_us']['eager']:.1f}" for c in compiled.values()) + ")")
    for n, g in numbers["guards"].items():
        out.append(f"- guards, {n} ranks, added us per collective: " + "; ".join(
            f"{label}: checks {a['checks_us']:+.1f}, timeout {a['timeout_us']:+.1f}"
            for label, a in g["added"].items()))
    for n, w in numbers["writes"].items():
        out.append(f"- writes, {n} ranks: " + "; ".join(
            f"{label} {r['added_us']:+.1f} us ({r['ratio']:.2f}x numpy)"
            for label, r in w["rows"].items()))
    for key in ("lm", "lm_torch"):
        for n, c in numbers[key].items():
            med, tokens = c["median_s"], c["batch"] * c["seq"]
            out.append(f"- GPT step ({key}), {n} ranks {tuple(c['mesh'])}: " + ", ".join(
                f"{side} {med[side] / med['hand']:.2f}x hand ({tokens / med[side]:.0f} "
                f"tokens/s)" for side in ("mtensor", "compiled", "torch") if med.get(side)))
    for n, c in [*numbers["checkpoint"].items(), *numbers["checkpoint_large"].items()]:
        mine, gather = c["median_s"]["mtensor.checkpoint"], c["median_s"]["gather + np.save"]
        out.append(f"- checkpoint, {n} ranks, {c['mib']:.0f} MiB: save "
                   f"{c['mib'] * 2 ** 20 / mine[0] / 1e6:.0f} MB/s, load "
                   f"{c['mib'] * 2 ** 20 / mine[1] / 1e6:.0f} MB/s; gather to rank 0 / mtensor "
                   f"{gather[0] / mine[0]:.2f}x (save), {gather[1] / mine[1]:.2f}x (load)")
    return out


def headlines(results):
    out = []
    n = min(results["ranks"])
    two = results["collectives"].get(n) or {"rows": []}
    g = {(r["kind"], r["bytes"]): r for r in (results["gloo"].get(n) or {}).get("rows", [])}
    for row in two["rows"]:
        if row["bytes"] in (1 << 20, 64 << 20):
            grow = g.get((row["kind"], row["bytes"]), {})
            out.append(f"- {row['kind']} {size_label(row['bytes'])}, {n} ranks: "
                       f"mtensor / mpi4py {ratio(row['mtensor'], row['mpi4py'])}, "
                       f"mtensor / gloo {ratio(grow.get('mtensor'), grow.get('gloo'))}")
    for n in results["ranks"]:
        m = (results["strong"].get(n) or {}).get("median_s", {})
        c = (results["train_no_torch"].get(n) or {}).get("median_s", {})
        out.append(f"- training step, {n} ranks: mtensor / hand "
                   f"{ratio(m.get('mtensor'), m.get('hand'))} (without torch loaded: "
                   f"{ratio(c.get('mtensor'), c.get('hand'))}), compiled / hand "
                   f"{ratio(m.get('compiled'), m.get('hand'))}, mtensor / DTensor "
                   f"{ratio(m.get('mtensor'), m.get('DTensor'))}")
    for n, r in results["algorithms"].items():
        rows = (r or {}).get("rows", []) + (results.get("sklearn", {}).get(n) or {}).get("rows", [])
        cells = [f"{row['case'].split(' (')[0]} {row['ratio']:.2f}" for row in rows]
        out.append(f"- numpy on the whole array in one process / split over {n} ranks: "
                   + ", ".join(cells))
    return out + more_headlines(results)


def write_report(results, out, argv):
    out.mkdir(parents=True, exist_ok=True)
    from figures import make_plots

    plots, plot_note = make_plots(results, out / "plots")
    lines = ["# mtensor benchmarks", "",
             "Generated by `benchmarks/run.py`; do not edit by hand." + (
                 " **Quick mode: tiny sizes, few repetitions, numbers meaningless.**"
                 if results["quick"] else ""), "",
             *[f"- {ln}" for ln in machine()], "",
             f"How to reproduce: `{argv}` (one BLAS thread per rank; "
             f"took {results['seconds']:.0f} s).", "", "## Headlines", "",
             *headlines(results), "",
             *collectives_md(results["collectives"], results["gloo"]),
             *dispatch_md(results["dispatch"]),
             *train_md(results), *scaling_md(results), *algorithms_md(results),
             *more_md(results), "## Plots", ""]
    lines += [f"![{p.stem}](plots/{p.name})" for p in plots] or [plot_note]
    heat = HEAT_NOTE if _version("heat") is None else "Heat is installed; no Heat side yet."
    lines += ["", "## Notes", "", f"- {heat}",
              "- Timings on a shared, small machine move by several percent between runs; "
              "only the interleaved ratios within one table are meant to be compared."]
    lines += [f"- FAILED: {f}" for f in results["failures"]]
    (out / "RESULTS.md").write_text("\n".join(lines) + "\n")
