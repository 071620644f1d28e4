#!/usr/bin/env python3
"""Where the suite's time goes: the slowest tests of ctest's JUnit files (`ctest --output-junit`).

Usage: test-times.py [--top N] [--csv OUT] CONFIG=FILE [CONFIG=FILE ...]
Prints the N slowest tests (default 15) over every configuration, with each configuration's
count and total; --csv writes every test's seconds (config,test,seconds,status).
scripts/test.sh writes build/<config>/ctest-junit.xml; .ci/run prints this at its end.
"""
import argparse
import csv
import os
import sys
import xml.etree.ElementTree as ET


def read(config, path):
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None:
            status = "failed"
        elif case.find("skipped") is not None or status == "notrun":
            status = "skipped"
        else:
            status = "passed"
        rows.append((config, case.get("name"), float(case.get("time", "0")), status))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--csv")
    ap.add_argument("files", nargs="+", metavar="CONFIG=FILE")
    a = ap.parse_args()
    rows = []
    for spec in a.files:
        config, _, path = spec.partition("=")
        if not path:
            config, path = os.path.basename(os.path.dirname(spec)), spec
        if not os.path.exists(path):
            print(f"test-times: {path}: no such file (that configuration did not run)", file=sys.stderr)
            continue
        rows += read(config, path)
    for config in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == config]
        print(f"  {config}: {len(mine)} tests, {sum(1 for r in mine if r[3] == 'passed')} passed, "
              f"{sum(r[2] for r in mine):.0f} s of test time")
    print(f"== the {a.top} slowest tests ==")
    for config, name, secs, status in sorted(rows, key=lambda r: -r[2])[: a.top]:
        print(f"  {secs:7.1f} s  {config:8s} {name}{'' if status == 'passed' else '  (' + status + ')'}")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["config", "test", "seconds", "status"])
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
