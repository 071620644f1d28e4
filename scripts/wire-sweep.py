#!/usr/bin/python3
"""Each policy against wire latency (docs/wire.md, "Policies against latency"): the MCTS tree
policies and the hash map's policies on an emulated wire whose one-way latency goes from 0.1 to
20 us, on one host.

    scripts/wire-sweep.py [--build DIR] [--latencies 0.1,0.5,1,2,5,10,20] [--gbps 12]
                          [--nodes 2] [--ranks-per-node 1] [--seconds 0.5] [--out DIR]
                          [--match-games N] [--move-seconds S]

For each latency L it sets LOOM_WIRE=L,GBPS (the link's bandwidth; 10 M messages/s) and runs,
under `loomrun --emulate-nodes NODES`:
  - loom-calibrate (the cost model's components on that wire, into DIR/calibration-L.txt, which
    the runs below read: Auto objects pick with them);
  - bench_mcts 11x11 with the owner-invoked, cached-shared and root trees (its local-np1-t1 rows,
    one process alone, are the wire-free baseline every run repeats);
  - bench_objects --only containers --quick (every fixed policy, and the cost model's pick per
    cell: which policy an Auto object would take, and its time over the best one's);
  - with --match-games N, bench_mcts --match: each tree policy against local-1t (one process
    alone, no wire) on 9x9, N openings each played with both colours, at equal time per move
    (--move-seconds) and at equal rollouts: match strength against latency, a short run.
It writes DIR/wire-sweep.csv (variant = the policy's row, size = L in ns, metric, value, unit),
DIR/wire-sweep-mcts.png, DIR/wire-sweep-hash.png (and DIR/wire-sweep-match.png), and prints the
tables and, for each pair of lines, the latency where they cross.
"""
import argparse
import csv
import os
import subprocess
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MCTS_POLICIES = ["owner-invoked", "cached-shared", "root"]
HASH_VARIANTS = [("hash-insert", "atomic"), ("hash-find", "atomic"), ("hash-find", "phasal")]
HASH_POLICIES = ["onesided", "invoked", "cached"]


def run(cmd, env, log):
    print("+", " ".join(cmd), flush=True)
    with open(log, "w") as f:
        r = subprocess.run(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit(f"wire-sweep: {' '.join(cmd)} failed with status {r.returncode} (see {log})")


def read(path):
    with open(path, newline="") as f:
        return [(r["variant"], r["size"], r["metric"], float(r["value"]), r["unit"]) for r in csv.DictReader(f)]


def strip_wire(variant):
    """The variant without its trailing "@<wire>-nodes<K>" (a match condition's "@equal-time" stays)."""
    head, _, tail = variant.rpartition("@")
    return head if head and "-nodes" in tail else variant


def sweep_point(a, lat, out):
    env = dict(os.environ)
    env["LOOM_WIRE"] = f"{lat},{a.gbps},10"
    np_ = a.nodes * a.ranks_per_node
    loomrun = [os.path.join(a.build, "loomrun"), "--emulate-nodes", str(a.nodes), "-n", str(np_), "--timeout", "900"]
    cal = os.path.join(out, f"calibration-{lat}.txt")
    run(loomrun + [os.path.join(a.build, "loom-calibrate"), "--iters", "1000", "--output", cal], env, cal + ".log")
    env["LOOM_OBJECTS_CALIBRATION"] = cal
    mcts = os.path.join(out, f"mcts-{lat}.csv")
    run(loomrun + [os.path.join(a.build, "bench/bench_mcts"), "--policy", ",".join(MCTS_POLICIES), "--seconds", str(a.seconds),
                   "--csv", mcts], env, mcts + ".log")
    objs = os.path.join(out, f"objects-{lat}.csv")
    run(loomrun + [os.path.join(a.build, "bench/bench_objects"), "--quick", "--only", "containers", "--csv", objs], env, objs + ".log")
    rows = []
    if a.match_games > 0:
        match = os.path.join(out, f"match-{lat}.csv")
        run(loomrun + [os.path.join(a.build, "bench/bench_mcts"), "--match", "--policy", ",".join(MCTS_POLICIES), "--games",
                       str(a.match_games), "--move-seconds", str(a.move_seconds), "--csv", match], env, match + ".log")
        for v, size, metric, value, unit in read(match):
            if metric in ("win_rate", "wilson_lo", "wilson_hi", "games"):
                rows.append((strip_wire(v), metric, value, unit))
    for v, size, metric, value, unit in read(mcts):
        if metric == "rollouts_per_s" and size == "11":
            rows.append((strip_wire(v), metric, value, unit))
    for v, size, metric, value, unit in read(objs):
        if metric in ("ops_per_s", "us", "model_us") and size == "1":
            rows.append((strip_wire(v), metric, value, unit))
        elif strip_wire(v).startswith("model-pick/"):
            rows.append((strip_wire(v), metric, value, unit))
    return rows


def report_picks(lats, table):
    """The cost model's pick per container cell at each latency, and how far it is from the best."""
    print("\nthe cost model's pick (its time over the measured best fixed policy's), one at a time")
    cells = sorted({k[0] for k in table if k[1] == "pick_over_best"})
    for cell in cells:
        line = f"  {cell[len('model-pick/'):]:22s}"
        for lat in lats:
            picked = [k[0].rsplit("/", 1)[1] for k in table if k[1] == "picked" and k[2] == lat and k[0].startswith(cell + "/")]
            ratio = table.get((cell, "pick_over_best", lat), (float("nan"),))[0]
            line += f"  {lat:g}us:{picked[0] if picked else '?'} {ratio:.2f}"
        print(line)


def crossings(xs, series):
    """Latencies where two lines swap order (linear interpolation between the two points)."""
    out = []
    names = sorted(series)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            for k in range(len(xs) - 1):
                d0 = series[a][k] - series[b][k]
                d1 = series[a][k + 1] - series[b][k + 1]
                if d0 * d1 < 0:
                    x = xs[k] + (xs[k + 1] - xs[k]) * d0 / (d0 - d1)
                    out.append((a, b, x, a if d1 > 0 else b))
    return out


def figure(xs, series, title, ylabel, path):
    plt.figure(figsize=(7, 4.5))
    for name in sorted(series):
        plt.plot(xs, series[name], marker="o", label=name)
    finish(ylabel, title, path, logy=True)


def finish(ylabel, title, path, logy):
    """Axes, labels and the file of a plot against latency."""
    plt.xscale("log")
    if logy:
        plt.yscale("log")
    plt.xlabel("one-way wire latency (us)")
    plt.ylabel(ylabel)
    plt.title(title)
    plt.grid(True, which="both", alpha=0.3)
    plt.legend(fontsize=7)
    plt.tight_layout()
    plt.savefig(path, dpi=110)
    plt.close()
    print("wrote", path)


def report(xs, series, what, unit):
    print(f"\n{what} ({unit}) against one-way latency (us)")
    print(f"{'':28s}" + "".join(f"{x:>10g}" for x in xs))
    for name in sorted(series):
        print(f"{name:28s}" + "".join(f"{v:>10.4g}" for v in series[name]))
    for a, b, x, above in crossings(xs, series):
        print(f"  {a} and {b} cross near {x:.2g} us ({above} ahead beyond)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build/release")
    p.add_argument("--latencies", default="0.1,0.5,1,2,5,10,20")
    p.add_argument("--gbps", type=float, default=12)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--ranks-per-node", type=int, default=1)
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("--out", default="wire-sweep")
    p.add_argument("--match-games", type=int, default=0, help="openings per match condition (each played twice); 0: no matches")
    p.add_argument("--move-seconds", type=float, default=0.02)
    a = p.parse_args()
    if a.match_games < 0 or a.match_games > 81:
        sys.exit("wire-sweep: --match-games is 0..81 (the openings of a 9x9 board)")
    lats = [float(x) for x in a.latencies.split(",")]
    if len(lats) < 2 or any(x <= 0 or x > 1000 for x in lats):
        sys.exit("wire-sweep: --latencies needs two or more latencies in (0, 1000] us")
    os.makedirs(a.out, exist_ok=True)
    table = {}
    for lat in lats:
        for v, metric, value, unit in sweep_point(a, lat, a.out):
            table[(v, metric, lat)] = (value, unit)
    with open(os.path.join(a.out, "wire-sweep.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant", "size", "metric", "value", "unit"])
        for (v, metric, lat), (value, unit) in sorted(table.items()):
            w.writerow([v, int(round(lat * 1000)), metric, value, unit])
    mcts = defaultdict(list)
    for lat in lats:
        for v, metric, _ in [k for k in table if k[2] == lat and k[1] == "rollouts_per_s"]:
            name = v.rsplit("-np", 1)[0]
            if name in MCTS_POLICIES or v.startswith("local-np1-t1"):
                mcts[name].append(table[(v, metric, lat)][0])
    mcts = {k: v for k, v in mcts.items() if len(v) == len(lats)}
    report(lats, mcts, "MCTS 11x11 rollouts/s", "1/s")
    figure(lats, mcts, "MCTS for Hex 11x11 against wire latency", "rollouts/s", os.path.join(a.out, "wire-sweep-mcts.png"))
    hashes = {}
    for op, level in HASH_VARIANTS:
        for pol in HASH_POLICIES:
            key = f"{op}/{pol}/{level}"
            vals = [table.get((key, "ops_per_s", lat), (None,))[0] for lat in lats]
            if all(x is not None for x in vals):
                hashes[key] = vals
    for op, level in HASH_VARIANTS:
        part = {k: v for k, v in hashes.items() if k.startswith(op + "/") and k.endswith("/" + level)}
        report(lats, part, f"{op} ({level}) operations/s, one at a time", "1/s")
    figure(lats, hashes, "Hash map policies against wire latency (one at a time)", "operations/s",
           os.path.join(a.out, "wire-sweep-hash.png"))
    report_picks(lats, table)
    if a.match_games > 0:
        report_matches(lats, table, os.path.join(a.out, "wire-sweep-match.png"))


def report_matches(lats, table, path):
    """Each tree policy's win rate against local-1t (one process alone) at each latency."""
    plt.figure(figsize=(7, 4.5))
    for cond, style in (("equal-time", "-"), ("equal-rollouts", ":")):
        print(f"\nwin rate against local-1t at {cond} (95% Wilson interval)")
        for pol in MCTS_POLICIES:
            keys = [k for k in table if k[1] == "win_rate" and k[0].startswith(pol + "-np") and k[0].endswith("@" + cond)]
            if not keys:
                continue
            v = keys[0][0]
            rates = [table.get((v, "win_rate", lat), (float("nan"),))[0] for lat in lats]
            lo = [table.get((v, "wilson_lo", lat), (float("nan"),))[0] for lat in lats]
            hi = [table.get((v, "wilson_hi", lat), (float("nan"),))[0] for lat in lats]
            print(f"  {pol:16s}" + "".join(f"  {lat:g}us: {r:.2f} [{l:.2f}, {h:.2f}]" for lat, r, l, h in zip(lats, rates, lo, hi)))
            plt.errorbar(lats, rates, yerr=[[r - l for r, l in zip(rates, lo)], [h - r for r, h in zip(rates, hi)]], linestyle=style,
                         marker="o", capsize=3, label=f"{pol}, {cond}")
    plt.axhline(0.5, color="grey", linewidth=0.8, label="local (one process): 0.5")
    finish("win rate against local-1t", "MCTS for Hex 9x9: match strength against wire latency", path, logy=False)


if __name__ == "__main__":
    main()
