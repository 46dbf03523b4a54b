#!/usr/bin/env python3
"""bench/run-all --from a.json,b.json pools the rounds of two earlier runs.

Two made-up runs of clump over udp;ofi_rxd beside fi_pingpong: 2 rounds in
the first, 3 in the second. Each round's 256 KiB latency ratio is chosen so
that the median over all 5 rounds (1.10x) is neither run's own (1.30x and
1.05x): the summary must show the pooled one, and the pooled results.json
must number the rounds 1 to 5. Runs of different settings must not pool,
and a file that is missing or not a run's results is a plain error. Counts
of rounds or samples out of range are refused before anything runs.
"""
import json
import os
import subprocess
import sys
import tempfile

RUN_ALL = sys.argv[1]
SIZE = 262144


def run(config, rnd, fid, value):
    measurements = [{"id": fid, "bytes": SIZE, "unit": "us", "median": value}]
    return {"config": config, "round": rnd, "command": "made up", "wall_s": 1.0,
            "result": {"measurements": measurements, "machine": {"cores_online": 2}}}


def results(commit, ratios, reps=5):
    runs = []
    for i, ratio in enumerate(ratios, 1):
        runs.append(run("clump ofi udp", i, "echo", 1000.0 * ratio))
        runs.append(run("fi_pingpong udp", i, "latency", 1000.0))
    return {"benchmark": "run-all", "format_version": 1, "commit": commit, "quick": False, "rounds": len(ratios),
            "reps": reps, "host": "test", "started": "2026-11-29T00:00:00", "seconds": 10.0,
            "missing_packages": [], "runs": runs, "send_breakdown": None, "splitc": None, "plots": []}


def main():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        a, b, c = (os.path.join(d, n) for n in ("a.json", "b.json", "c.json"))
        json.dump(results("aaaaaaa", [1.30, 1.40]), open(a, "w"))
        json.dump(results("bbbbbbb", [1.00, 1.05, 1.10]), open(b, "w"))
        json.dump(results("ccccccc", [1.00], reps=3), open(c, "w"))
        out = os.path.join(d, "out")
        p = subprocess.run([RUN_ALL, "--from", f"{a},{b}", "--out", out], capture_output=True, text=True)
        if p.returncode != 0:
            failures.append(f"pooling failed ({p.returncode}): {p.stderr[-2000:]}")
        else:
            summary = open(os.path.join(out, "summary.md")).read()
            # The ofi latency table's 256 KiB row: clump, fi_pingpong, their ratio.
            want = "| 256 KiB | 1100.0 (1000.0 to 1400.0) | 1000.0 | 1.10x (1.00 to 1.40) |"
            rows = [line for line in summary.splitlines() if line.startswith(want)]
            if len(rows) != 1:
                failures.append(f"no 256 KiB latency row of the median of the 5 rounds' ratios: {rows!r}")
            if "--rounds 5" not in summary or "the rounds of 2 runs, pooled" not in summary:
                failures.append("the summary does not say it pools 2 runs of 5 rounds in all")
            pooled = json.load(open(os.path.join(out, "results.json")))
            rounds = sorted({r["round"] for r in pooled["runs"]})
            if rounds != [1, 2, 3, 4, 5] or pooled["rounds"] != 5:
                failures.append(f"pooled rounds {rounds}, rounds {pooled['rounds']}: expected 1 to 5")
            if pooled["commit"] != "aaaaaaa+bbbbbbb":
                failures.append(f"pooled commit {pooled['commit']!r}: expected both named")
        p = subprocess.run([RUN_ALL, "--from", f"{a},{c}", "--out", os.path.join(d, "bad")], capture_output=True,
                           text=True)
        if p.returncode == 0 or "only runs of the same settings pool" not in p.stderr + p.stdout:
            failures.append(f"runs of 5 and 3 reps pooled (exit {p.returncode}): {(p.stderr + p.stdout)[-500:]}")
        for bad in (os.path.join(d, "missing.json"), os.path.join(out, "summary.md")):
            p = subprocess.run([RUN_ALL, "--from", f"{a},{bad}", "--out", os.path.join(d, "bad")], capture_output=True,
                               text=True)
            said = p.stderr + p.stdout
            if p.returncode == 0 or f"--from {bad}:" not in said or "Traceback" in said:
                failures.append(f"--from {bad} (exit {p.returncode}) did not fail with a plain error: {said[-500:]}")
        # Counts out of range are refused before anything runs or is read.
        for bad in (["--rounds", "-1"], ["--reps", "0"], ["--reps", "18446744073709551616"], ["--rounds", "x"],
                    ["--from", a, "--reps", "3"]):
            try:
                p = subprocess.run([RUN_ALL, "--no-build", "--no-install", "--out", os.path.join(d, "bad")] + bad,
                                   capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                failures.append(f"{' '.join(bad)}: still running after 60 s, not refused at once")
                continue
            if p.returncode != 2 or "error:" not in p.stderr or "[round" in p.stdout + p.stderr:
                failures.append(f"{' '.join(bad)}: exit {p.returncode}, not refused at once: {p.stderr[-300:]}")
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
