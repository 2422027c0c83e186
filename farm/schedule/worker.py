"""The worker loop: take tasks, keep the device busy, send results back.

A worker keeps up to ``pipeline`` tiles launched on its device (three by default):
while the device computes one, the host finishes and sends the one before. Tasks
the master sends ahead wait in a local queue. An exception in a tile is sent to
the master with its traceback, and the worker carries on; the master decides
about retries and exclusion. A stop message ends the worker at once (anything
still queued or running is the master's to re-assign or drop).
"""

from __future__ import annotations

import os
import time
import traceback
from collections import deque
from collections.abc import Callable

from farm.compute.render import TileRenderer, wait_any
from farm.plan import Plan
from farm.schedule.state import Task
from farm.schedule.transport import WorkerLink

HEARTBEAT_S = 5.0


def _testing_aids(rank: int) -> None:
    """Testing aids, read before each tile: ``FARM_TEST_FAIL_RANKS=2,3`` makes those
    ranks fail every tile; ``FARM_TEST_TILE_DELAY=s`` sleeps s seconds, so that a test
    can interrupt a small render mid-way however fast the machine is."""
    ranks = os.environ.get("FARM_TEST_FAIL_RANKS", "")
    if str(rank) in ranks.split(","):
        raise RuntimeError(f"injected failure on rank {rank} (FARM_TEST_FAIL_RANKS)")
    delay = float(os.environ.get("FARM_TEST_TILE_DELAY", "0") or 0)
    if delay > 0:
        time.sleep(delay)


def run_worker(plan: Plan, make_renderer: Callable[[], TileRenderer], link: WorkerLink,
               pipeline: int = 3) -> None:
    t0 = time.perf_counter()
    try:
        renderer = make_renderer()
    except Exception as err:  # device missing, build failure: the master must hear of it
        link.lost(f"{type(err).__name__}: {err}")
        link.close()
        return
    counters = renderer.counters  # the timeline's worker side (farm/timeline.py)
    counters.add("setup", time.perf_counter() - t0)
    link.ready()
    queued: deque[Task] = deque()
    running: deque = deque()  # (task, launch)
    last_sent = time.monotonic()
    try:
        while True:
            busy = bool(queued or running)
            if busy:
                messages = link.receive(0.0)
            else:
                with counters.timing("idle"):
                    messages = link.receive(HEARTBEAT_S)
            if None in messages:
                return
            new = [m for m in messages if m is not None]
            queued.extend(new)
            for task in new:  # per-frame host work starts now, beside the kernels in flight
                renderer.prepare(plan.frames[task.frame])
            for ahead in (1, 2):  # the next frames are likely ours too
                if new and new[-1].frame + ahead < len(plan.frames):
                    renderer.prepare(plan.frames[new[-1].frame + ahead])

            while queued and len(running) < pipeline:
                task = queued.popleft()
                try:
                    _testing_aids(link.rank)
                    frame = plan.frames[task.frame]
                    running.append((task, renderer.launch(frame, plan.grid.tile(task.tile))))
                except Exception:
                    link.failed(task, traceback.format_exc())
                    last_sent = time.monotonic()

            if running:
                task, launch = running[0]
                if wait_any(launch, deadline=time.monotonic() + 0.05):
                    running.popleft()
                    try:
                        result = renderer.finish(launch)
                        with counters.timing("send"):
                            link.result(task, result)
                    except Exception:
                        link.failed(task, traceback.format_exc())
                    last_sent = time.monotonic()
            if time.monotonic() - last_sent > HEARTBEAT_S:
                link.heartbeat()
                last_sent = time.monotonic()
    finally:
        renderer.close()
        link.close()
