"""Shared helpers of the benchmark drivers (net-bench, run-all): how busy the
machine is, waiting for it to be quiet, running one configuration with its
environment, and medians and number formats for the tables."""

import os
import resource
import statistics
import subprocess
import time


def stat_fields():
    """Busy CPU seconds of the whole machine, and how many tasks are running now, from /proc/stat."""
    busy, running = 0.0, 0
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu "):
                v = [int(x) for x in line.split()[1:9]]
                busy = (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait
            elif line.startswith("procs_running"):
                running = int(line.split()[1])
    return busy, running


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)  # the commands run so far, once waited for
    return r.ru_utime + r.ru_stime


def wait_until_quiet(most):
    """Waits (up to `most` seconds) until nothing but this script has run for a second: other builds and tests
    on the machine take the cores the two spinning ranks need. Returns the seconds waited and whether it was quiet."""
    t0, quiet = time.monotonic(), 0
    while time.monotonic() - t0 < most:
        quiet = quiet + 1 if stat_fields()[1] <= 1 else 0
        if quiet >= 10:
            return time.monotonic() - t0, True
        time.sleep(0.1)
    return time.monotonic() - t0, most <= 0


def clean_env(extra):
    """This process's environment without CLUMP_* settings (a stray one would change every configuration),
    plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLUMP_")}
    env.update(extra)
    return env


def run_timed(cmd, env, timeout=None):
    """Runs cmd; returns (completed process or None on timeout, wall seconds, share of the machine's CPU that
    other processes used meanwhile: the noise the run ran in)."""
    busy0, cpu0, t0 = stat_fields()[0], children_cpu(), time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        p = None
    wall, busy, ours = time.monotonic() - t0, stat_fields()[0] - busy0, children_cpu() - cpu0
    foreign = max(0.0, busy - ours) / (wall * os.cpu_count()) if wall > 0 else 0.0
    return p, wall, foreign


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def fmt(v, unit=""):
    if v is None:
        return "-"
    if unit == "x":
        return f"{v:.2f}x"
    a = abs(v)
    s = f"{v:.4f}" if a < 0.1 else f"{v:.3f}" if a < 10 else f"{v:.2f}" if a < 100 else f"{v:.1f}"
    return f"{s} {unit}".strip()


def fmt_spread(lo, hi, unit=""):
    if lo is None:
        return "-"
    return f"{fmt(lo, unit)} - {fmt(hi, unit)}"


def bytes_text(n):
    n = int(round(n))
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"
