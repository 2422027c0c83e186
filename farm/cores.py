"""How many cores this process may use: the one count every thread pool sizes itself by."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on: its affinity (a Slurm allocation, taskset), else
    every core of the machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
