#!/usr/bin/env python3
"""A farm command's wall-clock seconds, its own CPU seconds and its children's (ffmpeg's).

    python3 benchmarks/own_cpu.py encode STORE [farm encode's options]

Runs ``farm ARGS`` in this process and prints one line: what the farm's own threads
spent (getrusage SELF) beside what the processes it started spent (CHILDREN: the
encoders), e.g. how much of `farm encode`'s CPU is x264's."""

from __future__ import annotations

import contextlib
import resource
import sys
import time


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    t0 = time.perf_counter()
    import farm.cli

    sys.argv = ["farm", *sys.argv[1:]]
    with contextlib.suppress(SystemExit):
        farm.cli.main()
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"farm {' '.join(sys.argv[1:3])}: wall {time.perf_counter() - t0:.2f} s, the farm's own CPU "
          f"{own.ru_utime + own.ru_stime:.1f} s, its children's (ffmpeg) "
          f"{children.ru_utime + children.ru_stime:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
