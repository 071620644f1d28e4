#!/usr/bin/python3
"""Draws Loom benchmarks' CSV files (variant,size,metric,value,unit) as PNG with matplotlib.

    scripts/plot.py CSV... [--out DIR]

For each CSV and each metric with more than one row it draws one figure next to the CSV (or in
DIR): a line per variant over size where a variant has several sizes, else bars. Rows whose
variant starts with "fig6/" (bench_objects, seed 001's Figure 6) get a figure of their own:
queue push latency against the computing between pushes, log scale. With --scaling NAME, rows
of every CSV whose variant is "<policy>-np<P>-t<T>" (bench_mcts) also make one figure NAME.png:
the metric rollouts_per_s against processes, a line per policy and thread count. With --nas
NAME, bench_nas CSVs (size = "<kernel>.<class>") make NAME.png instead: each variant's speed
relative to the OpenMP build on one thread (omp-t1 seconds / seconds), grouped by problem.
With --offload NAME, bench_offload CSVs make NAME.png: latency, overhead and message rate
against requester threads, a line per mode. With --rpipe NAME, bench_rpipe and bench_rpipe_mpi
CSVs make NAME.png: latency and bandwidth against message size for rwrite, rread, the
Messenger and MPI RMA. With --engine NAME, bench_hex_engine CSVs make NAME.png: each match's
win rate against the plain engine with its 95% interval, a bar per match (variant, board, and
the time a move from the CSV's name when it carries one, "..._<seconds>.csv").
Prints each file written.
"""
import argparse
import csv
import os
import re
import statistics
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            try:
                rows.append((r["variant"], float(r["size"]), r["metric"], float(r["value"]), r.get("unit", "")))
            except (KeyError, ValueError) as e:
                sys.exit(f"plot.py: {path}: not a Loom benchmark CSV ({e})")
    return rows


def fig6(rows, out):
    series = defaultdict(list)
    for variant, size, metric, value, _ in rows:
        if variant.startswith("fig6/") and metric == "us":
            series[variant[len("fig6/"):]].append((size, value))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("computing between pushes, every process (us)")
    ax.set_ylabel("queue push latency (us, computing left out)")
    ax.set_title("Queue push as owners get busy (seed 001 Figure 6)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def metric_figure(rows, metric, out):
    by_variant = defaultdict(list)
    unit = ""
    for variant, size, m, value, u in rows:
        if m == metric and not variant.startswith("fig6/"):
            by_variant[variant].append((size, value))
            unit = u or unit
    if sum(len(v) for v in by_variant.values()) < 2:
        return None
    # Lines where most variants span several sizes (a rate over message sizes); else a bar per
    # variant and size (single figures: latencies, counts), on a log axis when they span decades.
    multi = sum(1 for pts in by_variant.values() if len({s for s, _ in pts}) > 1)
    lines = multi * 2 > len(by_variant)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    if lines:
        for name, pts in sorted(by_variant.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size")
        ax.legend(fontsize=7, ncol=2)
    else:
        bars = sorted((f"{n} @{s:g}" if len(pts) > 1 else n, v) for n, pts in by_variant.items() for s, v in pts)
        values = [v for _, v in bars]
        ax.barh([n for n, _ in bars], values)
        positive = [v for v in values if v > 0]
        if positive and max(positive) / min(positive) > 100:
            ax.set_xscale("log")
        ax.tick_params(axis="y", labelsize=6)
    ax.set_title(metric)
    (ax.set_ylabel if lines else ax.set_xlabel)(f"{metric} ({unit})" if unit else metric)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def nas_figure(paths, out):
    seconds = defaultdict(dict)  # problem -> variant -> seconds
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r.get("metric") == "seconds":
                    seconds[r["size"]][r["variant"]] = float(r["value"])
    problems = [p for p in sorted(seconds, key=lambda p: ("SWAB".find(p[-1]), p)) if "omp-t1" in seconds[p]]
    if not problems:
        return None
    variants = sorted({v for p in problems for v in seconds[p] if v != "omp-t1"}, key=lambda v: (not v.startswith("omp"), v))
    fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(problems)), 4.5))
    width = 0.8 / max(1, len(variants))
    colors = {v: f"C{i}" for i, v in enumerate(variants)}
    labelled = set()
    for k, p in enumerate(problems):
        here = [v for v in variants if v in seconds[p]]  # bars of a problem side by side, centred
        for i, v in enumerate(here):
            x = k + (i - (len(here) - 1) / 2) * width
            ax.bar(x, seconds[p]["omp-t1"] / seconds[p][v], width, color=colors[v], label=None if v in labelled else v)
            labelled.add(v)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(problems)), problems)
    ax.set_ylabel("speed relative to OpenMP, 1 thread")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def scaling_figure(rows, out, metric="rollouts_per_s"):
    series = defaultdict(dict)
    for variant, _, m, value, _ in rows:
        v = re.fullmatch(r"([a-z-]+)-np(\d+)-t(\d+)", variant)
        if v and m == metric:
            series[f"{v.group(1)} ({v.group(3)} thread{'s' if v.group(3) != '1' else ''})"][int(v.group(2))] = value
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in sorted(series.items()):
        xs = sorted(pts)
        ax.plot(xs, [pts[x] for x in xs], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("processes")
    ax.set_ylabel(f"{metric} (whole job)")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def offload_figure(rows, out):
    """bench_offload: latency, injection overhead and message rate against requester threads, a
    line per mode (variants offload-<mode>-t<T>), and the rate of 8 threads against queue pairs
    (offload-<mode>-t8-q<Q>); over several CSVs (runs), the median of each point."""
    metrics = [("latency_us", "latency of one READ (us)", True), ("overhead_us", "time inside post() (us)", True),
               ("msgs_per_s", "READs per second", False)]
    series = {m: defaultdict(lambda: defaultdict(list)) for m, _, _ in metrics}
    qps = defaultdict(lambda: defaultdict(list))
    for variant, _, metric, value, _ in rows:
        v = re.fullmatch(r"offload-([a-z-]+)-t(\d+)", variant)
        if v and metric in series:
            series[metric][v.group(1)][int(v.group(2))].append(value)
        q = re.fullmatch(r"offload-([a-z-]+)-t\d+-q(\d+)", variant)
        if q and metric == "msgs_per_s":
            qps[q.group(1)][int(q.group(2))].append(value)
    if not series["latency_us"]:
        return None
    fig, axes = plt.subplots(1, 4, figsize=(17, 4))
    panels = [(series[m], label, log, "requester threads") for m, label, log in metrics]
    panels.append((qps, "READs per second, 8 threads", False, "queue pairs to the peer"))
    colour = {m: f"C{i}" for i, m in enumerate(sorted(series["latency_us"]))}  # one colour a mode in every panel
    for ax, (data, label, log, xlabel) in zip(axes, panels):
        for mode, pts in sorted(data.items()):
            xs = sorted(pts)
            ax.plot(xs, [statistics.median(pts[x]) for x in xs], marker="o", label=mode, color=colour.get(mode))
        ax.set_xscale("log", base=2)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("8-byte READs to one peer: direct injection and offloading (seed 004), median of the runs")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def rpipe_figure(rows, out):
    """bench_rpipe beside bench_rpipe_mpi: latency_us and MB_per_s against size, a line per
    variant (rwrite, rread, messenger, mpi-put, mpi-get and the MPI_Win_create forms); over
    several CSVs (runs), the median of each point."""
    wanted = re.compile(r"(rwrite|rread|messenger|mpi-put|mpi-get)(-create)?(@.*)?")
    data = {m: defaultdict(lambda: defaultdict(list)) for m in ("latency_us", "MB_per_s")}
    for variant, size, metric, value, _ in rows:
        if wanted.fullmatch(variant) and metric in data and size > 0:
            data[metric][variant][size].append(value)
    if not data["latency_us"]:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, (metric, label) in zip(axes, [("latency_us", "latency (us)"), ("MB_per_s", "MB/s")]):
        for variant, pts in sorted(data[metric].items()):
            xs = sorted(pts)
            style = "--" if variant.startswith("mpi") else ":" if variant.startswith("messenger") else "-"
            ax.plot(xs, [statistics.median(pts[x]) for x in xs], style, marker="o", label=variant)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message bytes")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("rpipe (rwrite: ping-pong halved; rread: READ + completion) beside Loom's Messenger and Open MPI RMA, 2 ranks",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def engine_figure(paths, out):
    """bench_hex_engine: win_rate with wilson_lo/wilson_hi per (variant, board), one bar each."""
    bars = []
    for path in paths:
        rows = read_rows(path)
        m = re.search(r"_([0-9.]+)\.csv$", os.path.basename(path))
        when = f", {m.group(1)} s a move" if m else ""
        got = defaultdict(dict)
        for variant, size, metric, value, _ in rows:
            if variant.startswith("engine-") and metric in ("win_rate", "wilson_lo", "wilson_hi", "games"):
                got[(variant, int(size))][metric] = value
        for (variant, board), v in sorted(got.items()):
            if "win_rate" in v:
                name = variant.split("@")[0].removeprefix("engine-")
                for policy in ("-owner-invoked", "-local", "-root"):
                    name = name.replace(policy, "\n" + policy[1:], 1)
                label = f"{name}\n{board}x{board}{when}, {v.get('games', 0):.0f} games"
                bars.append((label, v["win_rate"], v.get("wilson_lo", v["win_rate"]), v.get("wilson_hi", v["win_rate"])))
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 2.4 * len(bars)), 4.8))
    xs = range(len(bars))
    ax.bar(xs, [b[1] for b in bars], yerr=[[b[1] - b[2] for b in bars], [b[3] - b[1] for b in bars]], capsize=6, color="tab:blue")
    ax.axhline(0.5, color="grey", linestyle=":", label="even")
    ax.axhline(0.65, color="tab:red", linestyle="--", label="target 0.65")
    ax.set_xticks(list(xs), [b[0] for b in bars], fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_ylabel("win rate against the plain engine (95% interval)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="+")
    p.add_argument("--out", help="folder for the PNG files (default: beside each CSV)")
    p.add_argument("--scaling", help="also draw NAME.png: bench_mcts rollouts/s against processes over all CSVs")
    p.add_argument("--nas", help="draw NAME.png: bench_nas speeds relative to OpenMP on one thread over all CSVs")
    p.add_argument("--offload", help="draw NAME.png: bench_offload's three metrics against requester threads")
    p.add_argument("--rpipe", help="draw NAME.png: bench_rpipe beside bench_rpipe_mpi, latency and MB/s against size")
    p.add_argument("--engine", help="draw NAME.png: bench_hex_engine's matches, win rate and 95%% interval per match")
    a = p.parse_args()
    if a.engine:
        print(engine_figure(a.csv, a.engine + ".png"))
        return
    if a.rpipe:
        print(rpipe_figure([r for path in a.csv for r in read_rows(path)], a.rpipe + ".png"))
        return
    if a.offload:
        print(offload_figure([r for path in a.csv for r in read_rows(path)], a.offload + ".png"))
        return
    if a.nas:
        print(nas_figure(a.csv, a.nas + ".png"))
        return
    if a.scaling:
        every = [r for path in a.csv for r in read_rows(path)]
        print(scaling_figure(every, a.scaling + ".png"))
        return
    for path in a.csv:
        rows = read_rows(path)
        base = os.path.splitext(os.path.basename(path))[0]
        folder = a.out or os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        written = [fig6(rows, os.path.join(folder, f"{base}-fig6.png"))]
        for metric in sorted({r[2] for r in rows}):
            written.append(metric_figure(rows, metric, os.path.join(folder, f"{base}-{metric}.png")))
        for w in written:
            if w:
                print(w)


if __name__ == "__main__":
    main()
