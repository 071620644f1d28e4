#!/usr/bin/python3
"""Seed 001's node sweep on emulated nodes, beside the cost model's projection (docs/wire.md,
"Past this machine: the node sweep").

    scripts/scale-sweep.py [--build DIR] [--configs ib-edr:2:1,ib-edr:4:1,...] [--what containers,mcts]
                           [--quick] [--out DIR]

Each config is WIRE:NODES:RANKS_PER_NODE. For each it runs, under LOOM_WIRE=WIRE and
`loomrun -n NODES*RANKS --emulate-nodes NODES`, `bench_objects --only scale`: every process (rows
scale/) and rank 0 alone (rows scale-one/) insert and find keys spread over every process's part
under each policy and Auto, beside the projection's prediction (objects/projection.hpp) from
components measured in the same run, and the projection from 1 to 64 nodes. It writes
DIR/scale-sweep.csv (variant@WIRE-nodesN[xR], size, metric, value, unit), prints the model's error
per row and config, and plots the projection with the emulated points (DIR/scale-<wire>.png).

With `mcts` in --what it also runs `bench_mcts --model` (11x11, every tree policy but local) at
each config: the tree policies' model (mcts_shared_tree/projection.hpp) beside the measured
rollouts, the policies' fitted costs (extra_us) taken from the wire's smallest config (--model-from), rows
in DIR/scale-sweep-mcts.csv, the error per policy and config, and DIR/scale-mcts-<wire>.png.
"""
import argparse
import csv
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

POLICIES = ["onesided", "invoked", "cached", "auto"]
OPS = ["hash-insert", "hash-find"]


def parse_configs(text):
    out = []
    for item in text.split(","):
        parts = item.split(":")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit() or int(parts[1]) < 1 or int(parts[2]) < 1:
            sys.exit(f"scale-sweep: config '{item}' is not WIRE:NODES:RANKS_PER_NODE")
        out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def run_bench(a, wire, nodes, rpn, kind, args):
    """Runs a benchmark under the wire on NODES emulated nodes of RPN ranks; its CSV's rows,
    {(variant without the wire suffix, size, metric): value}, and the CSV's path."""
    name = f"{wire}-nodes{nodes}x{rpn}"
    csv_path = os.path.join(a.out, f"{kind}-{name}.csv")
    env = dict(os.environ, LOOM_WIRE=wire)
    cmd = [os.path.join(a.build, "loomrun"), "-n", str(nodes * rpn), "--emulate-nodes", str(nodes), "--timeout", "900"] + args(csv_path)
    cmd += ["--quick"] if a.quick else []
    print("+ LOOM_WIRE=" + wire, " ".join(cmd), flush=True)
    with open(csv_path + ".log", "w") as log:
        r = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit(f"scale-sweep: {kind} at {name} failed with status {r.returncode} (see {csv_path}.log)")
    with open(csv_path, newline="") as f:
        rows = {(row["variant"].split("@", 1)[0], int(row["size"]), row["metric"]): float(row["value"]) for row in csv.DictReader(f)}
    return name, csv_path, rows


def run_config(a, wire, nodes, rpn):
    return run_bench(a, wire, nodes, rpn, "scale",
                     lambda csv_path: [os.path.join(a.build, "bench/bench_objects"), "--only", "scale", "--csv", csv_path])


MCTS_POLICIES = ["owner-invoked", "cached-shared", "root"]


def run_mcts(a, wire, nodes, rpn, model_from):
    return run_bench(a, wire, nodes, rpn, "mcts",
                     lambda csv_path: [os.path.join(a.build, "bench/bench_mcts"), "--policy", ",".join(MCTS_POLICIES), "--csv", csv_path,
                                       "--seconds", "0.25" if a.quick else "0.5"]
                     + (["--model-from", model_from] if model_from else ["--model"]))


def report_mcts(results, fitted):
    """The tree policies: measured over model, host-adjusted (over root's share) and per worker CPU,
    both with the counts of the run itself; and the projection's error, the host-adjusted point
    over the line the wire's smallest run projects (its counts carried to this scale). The share
    within 30% of the cells the fit did not come from (root's host-adjusted figure is 1 by
    definition)."""
    print("\nMCTS: measured / model, rollouts/s over root's share (host) and a worker's CPU a rollout (cpu);"
          " proj: the point over the smallest run's projection")
    smallest = {name.split("-nodes")[0]: name for name in fitted}
    inside = projected = total = 0
    for name, rows in results.items():
        np = int(name.split("nodes")[1].split("x")[0]) * int(name.split("x")[-1])
        base = results.get(smallest.get(name.split("-nodes")[0]), {})
        for pol in MCTS_POLICIES:
            v = f"{pol}-np{np}-t1"
            host, cpu = rows.get((v, 11, "over_model_host")), rows.get((v, 11, "cpu_over_model"))
            if host is None:
                continue
            line = base.get((f"mcts-model/{pol}", int(name.split("nodes")[1].split("x")[0]), "rollouts_per_s"))
            proj = host * rows.get((v, 11, "model_rollouts_per_s"), 0) / line if line else None
            checked = pol != "root" and name not in fitted
            total += checked
            inside += checked and abs(host - 1) <= 0.3
            projected += checked and proj is not None and abs(proj - 1) <= 0.3
            print(f"  {name:22s} {pol:14s} host {host:6.2f}  cpu {cpu:6.2f}  proj {'-' if proj is None else f'{proj:5.2f}'}"
                  f"{'' if checked else '  (fit or root: not a check)'}")
    print(f"  host-adjusted within 30%: {inside} of {total}; projected within 30%: {projected} of {total}")


def figure_mcts(results, wire, path):
    """The model's projection from the wire's smallest run (lines) and the emulated runs (points:
    the measured rate over root's share of its model, as if every worker had a core)."""
    runs = {int(n[len(wire) + 6:].split("x")[0]): rows for n, rows in results.items() if n.startswith(wire + "-nodes") and n.endswith("x1")}
    if not runs:
        return
    model = runs[min(runs)]
    colors = dict(zip(MCTS_POLICIES, ["tab:orange", "tab:green", "tab:blue"]))
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for pol in MCTS_POLICIES:
        pts = sorted((size, val) for (var, size, metric), val in model.items() if var == f"mcts-model/{pol}" and metric == "rollouts_per_s")
        ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[pol], label=f"{pol}: model")
        xs = [n for n in sorted(runs) if runs[n].get((f"{pol}-np{n}-t1", 11, "over_model_host"))]
        ys = [runs[n][(f"{pol}-np{n}-t1", 11, "over_model_host")] * runs[n][(f"{pol}-np{n}-t1", 11, "model_rollouts_per_s")] for n in xs]
        ax.scatter(xs, ys, color=colors[pol], marker="o", label=f"{pol}: emulated, host-adjusted")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("nodes (one process each)")
    ax.set_ylabel("the job's rollouts/s (Hex 11x11)")
    ax.set_title(f"MCTS tree policies, {wire}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote", path)


def write_rows(path, results):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "size", "metric", "value", "unit"])
        for name, rows in results.items():
            for (v, size, metric), value in sorted(rows.items()):
                w.writerow([f"{v}@{name}", size, metric, value, ""])


def report(results):
    """measured / model per row and config; the share within 30%."""
    for prefix, what in (("scale-one/", "rank 0 alone"), ("scale/", "every process")):
        print(f"\n{what}: measured / model (us per operation and process)")
        names = list(results)
        print(f"{'':28s}" + "".join(f"{n:>22s}" for n in names))
        inside = total = 0
        for op in OPS:
            for pol in POLICIES:
                v = f"{prefix}{op}/{pol}"
                line = f"{v[len(prefix):]:28s}"
                for n in names:
                    r = results[n].get((v, 1, "over_model"))
                    busy = results[n].get((v, 1, "host_busy"), 0)
                    if r is None:
                        line += f"{'-':>22s}"
                        continue
                    total += 1
                    inside += abs(r - 1) <= 0.3
                    line += f"{r:>14.2f} (busy {busy:.2f})"
                print(line)
        print(f"  within 30%: {inside} of {total}")


def figure(results, wire, path):
    """Per operation: the model's projection (lines, from the 2-node run's components) and the
    emulated runs (points: rank 0's time per operation, as if every process had its own cores)."""
    runs = {int(n[len(wire) + 6:].split("x")[0]): rows for n, rows in results.items() if n.startswith(wire + "-nodes") and n.endswith("x1")}
    if not runs:
        return
    model = runs[min(runs)]
    colors = dict(zip(POLICIES, ["tab:blue", "tab:orange", "tab:green", "tab:red"]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ax, op in zip(axes, OPS):
        for pol in POLICIES:
            pts = sorted((size, val) for (var, size, metric), val in model.items()
                         if var == f"scale-model/{op}/{pol}" and metric == "ops_per_s")
            ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[pol], label=f"{pol}: model")
            xs = [n for n in sorted(runs) if runs[n].get((f"scale-one/{op}/{pol}", 1, "us"))]
            ax.scatter(xs, [n * 1e6 / runs[n][(f"scale-one/{op}/{pol}", 1, "us")] for n in xs], color=colors[pol], marker="o",
                       label=f"{pol}: emulated")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("nodes (one process each)")
        ax.set_title(f"{op}, {wire}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("the job's operations/s")
    axes[1].legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print("wrote", path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build/release")
    p.add_argument("--configs", default="ib-edr:2:1,ib-edr:4:1,ib-edr:8:1,ib-edr:2:2,tcp-10g:2:1,tcp-10g:4:1,tcp-10g:8:1")
    p.add_argument("--what", default="containers,mcts", help="containers, mcts or both")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default="scale-sweep")
    a = p.parse_args()
    what = set(a.what.split(","))
    if not what or what - {"containers", "mcts"}:
        sys.exit(f"scale-sweep: --what '{a.what}' names neither containers nor mcts")
    os.makedirs(a.out, exist_ok=True)
    configs = parse_configs(a.configs)
    wires = sorted({c[0] for c in configs})
    if "containers" in what:
        results = {}
        for wire, nodes, rpn in configs:
            name, _, rows = run_config(a, wire, nodes, rpn)
            results[name] = rows
        write_rows(os.path.join(a.out, "scale-sweep.csv"), results)
        report(results)
        for wire in wires:
            figure(results, wire, os.path.join(a.out, f"scale-{wire}.png"))
    if "mcts" in what:
        results, first, fitted = {}, {}, set()
        for wire, nodes, rpn in sorted(configs, key=lambda c: (c[0], c[1] * c[2], c[2])):
            name, path, rows = run_mcts(a, wire, nodes, rpn, first.get(wire))
            if wire not in first:
                first[wire] = path
                fitted.add(name)
            results[name] = rows
        write_rows(os.path.join(a.out, "scale-sweep-mcts.csv"), results)
        report_mcts(results, fitted)
        for wire in wires:
            figure_mcts(results, wire, os.path.join(a.out, f"scale-mcts-{wire}.png"))


if __name__ == "__main__":
    main()
