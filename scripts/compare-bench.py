#!/usr/bin/env python3
"""Compares benchmark CSVs of two builds run alternately on one machine (the rows every
benchmark writes: variant,size,metric,value,unit): for each row both builds have, the median of
the new build's values over the old build's, with the row's direction (a rate is better higher, a
time lower). Usage: compare-bench.py --old A.csv [A2.csv ...] --new B.csv [B2.csv ...] [--only SUBSTR]
Prints the rows and a summary: how many rows moved by more than the given noise (default 15%)."""
import argparse
import csv
import statistics
import sys

LOWER_IS_BETTER = ("us", "ns", "s", "seconds", "rtt_us", "us_per_op", "ms")


def load(paths):
    rows = {}
    for p in paths:
        with open(p) as f:
            for r in csv.reader(f):
                if len(r) < 5 or r[0] == "variant":
                    continue
                try:
                    v = float(r[3])
                except ValueError:
                    continue
                rows.setdefault((r[0], r[1], r[2]), []).append((v, r[4]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--noise", type=float, default=0.15)
    a = ap.parse_args()
    old, new = load(a.old), load(a.new)
    worse = better = same = 0
    for key in sorted(set(old) & set(new)):
        if a.only and a.only not in ",".join(key):
            continue
        o = statistics.median(v for v, _ in old[key])
        n = statistics.median(v for v, _ in new[key])
        if o == 0:
            continue
        unit = old[key][0][1]
        ratio = n / o
        good = ratio if not (unit in LOWER_IS_BETTER or key[2] in LOWER_IS_BETTER) else 1 / ratio if ratio else 0
        mark = "worse" if good < 1 - a.noise else "better" if good > 1 + a.noise else ""
        worse += mark == "worse"
        better += mark == "better"
        same += mark == ""
        print(f"{key[0]:40s} {key[1]:>8s} {key[2]:14s} old {o:12.4g} new {n:12.4g} {unit:10s} x{good:5.2f} {mark}")
    print(f"rows: {same} within {a.noise:.0%}, {better} better, {worse} worse (new over old, better = faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
