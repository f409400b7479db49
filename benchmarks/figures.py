"""The PNG plots of benchmarks/run.py (matplotlib, optional: without it, no plots)."""
import numpy as np

SIDE_STYLE = {"mtensor": "C0", "mpi4py": "C1", "hand": "C1", "gloo": "C2", "DTensor": "C2",
              "compiled": "C3"}


def _save(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def make_plots(results, folder):
    """([paths written], note) -- the note says why there are none."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "No plots: matplotlib is not installed (`pip install matplotlib`)."
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, res in results["collectives"].items():
        if res:
            paths.append(_collectives(plt, res, results["gloo"].get(n),
                                      folder / f"collectives_{n}ranks.png"))
    if results["dispatch"]:
        paths.append(_dispatch(plt, results["dispatch"], folder / "dispatch.png"))
    if any(results["strong"].values()):
        paths.append(_scaling(plt, results, folder / "train_step_scaling.png"))
    return paths, ""


def _collectives(plt, res, gloo_res, path):
    """mtensor and mpi4py from the torch-free launch, gloo from its own (see report.py)."""
    kinds = list(dict.fromkeys(r["kind"] for r in res["rows"]))
    fig, axes = plt.subplots(2, len(kinds), figsize=(4 * len(kinds), 7), squeeze=False)
    for col, kind in enumerate(kinds):
        for side, src in (("mtensor", res), ("mpi4py", res), ("gloo", gloo_res)):
            rows = [r for r in (src or {}).get("rows", []) if r["kind"] == kind and r[side]]
            if not rows:
                continue
            sizes = [r["bytes"] for r in rows]
            axes[0, col].loglog(sizes, [r[side] * 1e6 for r in rows], "o-", label=side,
                                color=SIDE_STYLE[side])
            axes[1, col].semilogx(sizes, [r["busbw_" + side] / 1e9 for r in rows], "o-",
                                  label=side, color=SIDE_STYLE[side])
        axes[0, col].set_title(f"{kind}, {res['ranks']} ranks")
        axes[0, col].set_ylabel("median us per call")
        axes[1, col].set_ylabel("bus bandwidth GB/s")
        axes[1, col].set_xlabel("tensor bytes")
        axes[0, col].legend()
    return _save(plt, fig, path)


def _dispatch(plt, res, path):
    labels = list(res["table"])
    fig, ax = plt.subplots(figsize=(10, 4.5))
    x = np.arange(len(labels))
    for i, (side, col) in enumerate((("mtensor", 1), ("DTensor", 3))):
        added = [(row[col] - row[0]) * 1e6 if row[col] else 0.0
                 for row in res["table"].values()]
        ax.bar(x + (i - 0.5) * 0.4, np.maximum(added, 0.1), 0.4, label=side,
               color=SIDE_STYLE[side])
    ax.set_yscale("log")
    ax.set_xticks(x, labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("us added over numpy per op")
    ax.set_title(f"dispatch overhead, {res['ranks']} ranks (Heat n/a)")
    ax.legend()
    return _save(plt, fig, path)


def _scaling(plt, results, path):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, kind in zip(axes, ("strong", "weak")):
        runs = {n: r for n, r in results[kind].items() if r}
        for side in ("mtensor", "compiled", "hand", "DTensor"):
            pts = [(n, r["median_s"][side] * 1e3) for n, r in runs.items()
                   if side in r["median_s"]]
            if pts:
                ax.plot(*zip(*pts), "o-", label=side, color=SIDE_STYLE[side])
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(runs), [str(n) for n in runs])
        ax.set_xlabel("ranks")
        ax.set_ylabel("median ms per fwd+bwd step")
        batch = "fixed global batch" if kind == "strong" else "fixed batch per dp rank"
        ax.set_title(f"{kind} scaling ({batch})")
        ax.legend()
    return _save(plt, fig, path)
