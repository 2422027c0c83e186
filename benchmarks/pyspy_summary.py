"""Where a profiled command's CPU went: a summary of a py-spy raw profile.

    py-spy record -r 100 --threads --subprocesses --format raw -o RUN.raw -- COMMAND
    python3 benchmarks/pyspy_summary.py RUN.raw [--rate 100] [--top 12] [--depth 3]

py-spy samples only the threads that are running (without ``--idle``), so samples over
the rate are CPU seconds of Python threads (native code they call, zstd or numpy,
included; threads Python does not know of, such as an OpenCL driver's, are not). It
prints the seconds by process and thread (thread names lose their trailing numbers:
``farm-pack_3`` counts as ``farm-pack``), then, for each of the busiest thread groups,
the innermost ``--depth`` frames that took the most.
"""

from __future__ import annotations

import argparse
import collections
import re


def parse(path: str):
    """(process, thread group, frames innermost last, samples) for each line."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        text = lines.read().splitlines()
    for line in text:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not count.isdigit():
            continue
        parts = stack.split(";")
        procs = [p for p in parts if p.startswith("process ")]
        threads = [p for p in parts if p.startswith("thread ")]
        process = procs[-1].split(":", 1)[-1].strip('"') if procs else "?"
        name = threads[0].split(": ", 1)[1] if threads and ": " in threads[0] else "(unnamed)"
        group = re.sub(r"[_-]?\d+$", "", name)
        frames = [p.split(" (")[0] for p in parts if not p.startswith(("process ", "thread "))]
        yield process, group, frames, int(count)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("raw", help="py-spy's --format raw output")
    ap.add_argument("--rate", type=float, default=100.0, help="py-spy's -r (samples a second)")
    ap.add_argument("--top", type=int, default=12, help="stacks shown a thread group")
    ap.add_argument("--depth", type=int, default=3, help="innermost frames that name a stack")
    ap.add_argument("--groups", type=int, default=8, help="thread groups shown in detail")
    args = ap.parse_args()
    by_thread: collections.Counter = collections.Counter()
    by_stack: dict = collections.defaultdict(collections.Counter)
    for process, group, frames, n in parse(args.raw):
        key = (process[:70], group)
        by_thread[key] += n
        by_stack[key][" <- ".join(reversed(frames[-args.depth:])) or "(no Python frame)"] += n
    total = sum(by_thread.values())
    print(f"{total / args.rate:.2f} CPU s of Python threads sampled")
    for (process, group), n in by_thread.most_common():
        print(f"{n / args.rate:8.2f} s  {group:24s} {process}")
    for key, n in by_thread.most_common(args.groups):
        print(f"\n{key[1]} ({n / args.rate:.2f} s) in {key[0]}")
        for stack, m in by_stack[key].most_common(args.top):
            print(f"{m / args.rate:8.2f} s  {stack}")


if __name__ == "__main__":
    main()
