"""The worker loop: take tasks, keep the device busy, send packed results back.

A tile passes three stages on a worker: launched (on the device: up to ``pipeline``
at once, three by default), packed (its results, still in the slot's pinned memory,
compressed and checksummed on the process's packing threads, farm/schedule/packer.py)
and sent. The worker's own thread only launches, polls and sends, so the device is
never left waiting for the host. It asks the master for as many tasks as it can hold
in these stages (``Joined.capacity``); tasks the master sends ahead wait in a local
queue. Where the worker writes its tiles into the store itself (a packer with a
:class:`~farm.store.inplace.SlotWriter`: under MPI, on a file system shared with the
master), a packed tile waits in a fourth stage until its bytes are durable, and then
only its record is sent; should the sync fail, the tile is sent with its bytes. An
exception in a tile is sent to the master with its traceback, and the
worker carries on; the master decides about retries and exclusion. A stop message
ends the worker at once: launches still on the device are left to finish on their own
(farm/compute/render.py, ``TileRenderer.close``), and the master re-assigns or drops
their tiles.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable

from farm.compute.render import TileRenderer
from farm.plan import Plan
from farm.schedule.packer import Packer
from farm.schedule.state import Task
from farm.schedule.transport import WorkerLink
from farm.store.inplace import SlotWriter
from farm.store.writer import Finished

HEARTBEAT_S = 5.0
POLL_S = 0.0002  # between looks at the device and the packer while work is in flight


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


def capacity(renderer: TileRenderer, packer: Packer, pipeline: int, tiles: int) -> int:
    """Tasks a worker holds at most: on the device, being packed (a GPU's tiles take
    milliseconds, their packing tens of them: one per packing thread, up to 24), and one
    queued; no more than the plan's ``tiles`` and the queued one. (Each but the queued
    one is a slot: device buffers and pinned memory for a tile and its histogram, 100 MB
    at 1080p for a deep frame's 10^7 counts: a one-frame job made 11 of them, 0.5-0.9 s
    on an H100, to render one tile.)"""
    packing = min(packer.threads, 24) if renderer.info.kind == "GPU" else 1
    syncing = packing if packer.slots is not None else 0  # written in place, awaiting a sync
    return min(pipeline + packing + syncing + 1, tiles + 1)


def run_worker(plan: Plan, make_renderer: Callable[[], TileRenderer], link: WorkerLink,
               packer: Packer, pipeline: int = 3) -> None:
    t0 = time.perf_counter()
    try:
        renderer = make_renderer()
    except Exception as err:  # device missing, build failure: the master must hear of it
        link.lost(f"{type(err).__name__}: {err}")
        link.close()
        return
    counters = renderer.counters  # the timeline's worker side (farm/runtime/timeline.py)
    slots = packer.slots  # where this worker writes its tiles itself (None: they travel)
    holds = capacity(renderer, packer, pipeline, len(plan.frames) * plan.grid.count)
    counters.add("setup", time.perf_counter() - t0)
    link.ready(holds)
    # the slots past the renderer's first few are made beside the first launches: their
    # pinned memory took 50 ms before the first kernel on an H100 host (a 1080p zoom)
    stop_growing = threading.Event()
    growing = threading.Thread(target=_grow, args=(renderer, holds - 1, stop_growing),
                               name=f"farm-slots-{link.rank}", daemon=True)
    growing.start()
    queued: deque[Task] = deque()
    running: deque = deque()  # (task, launch) on the device
    packing: deque[tuple[Task, concurrent.futures.Future[Finished]]] = deque()
    last_sent = time.monotonic()
    try:
        while True:
            if queued or running or packing or (slots is not None and slots.waiting):
                messages = link.receive(0.0)
            else:
                with counters.timing("idle"):
                    messages = link.receive(HEARTBEAT_S)
            if None in messages:
                return
            new = [m for m in messages if m is not None]
            queued.extend(new)
            _prepare_ahead(renderer, plan, new)

            while queued and len(running) < pipeline and renderer.free_slots():
                task = queued.popleft()
                try:
                    _testing_aids(link.rank)
                    running.append((task, renderer.launch(plan.frames[task.frame],
                                                          plan.grid.tile(task.tile))))
                except Exception:
                    link.failed(task, traceback.format_exc())
                    last_sent = time.monotonic()

            if _advance(renderer, packer, link, running, packing, counters, slots):
                last_sent = time.monotonic()
            elif running or packing or (slots is not None and slots.waiting):
                _wait(renderer, running, packing, slots)
            if time.monotonic() - last_sent > HEARTBEAT_S:
                link.heartbeat()
                last_sent = time.monotonic()
    finally:
        stop_growing.set()  # (a stop waits for one slot at most)
        growing.join()
        renderer.close()
        link.close()


def _grow(renderer: TileRenderer, slots: int, stop: threading.Event) -> None:
    """The renderer's slots up to ``slots``, one at a time until ``stop`` (beside the
    worker's loop). Where the device has no memory for them all, the worker goes on
    with those it has: fewer tiles in flight, none lost."""
    try:
        while renderer.slot_count < slots and not stop.is_set():
            renderer.ensure_slots(renderer.slot_count + 1)
    except Exception as err:  # (pyopencl's out-of-memory errors, MemoryError)
        print(f"farm: {renderer.slot_count} tile slots, not {slots}: {err}", file=sys.stderr)


def _prepare_ahead(renderer: TileRenderer, plan: Plan, new: list[Task]) -> None:
    """Start the host work of the frames of new tasks, and of the next frames (likely
    ours too), beside the kernels in flight."""
    for task in new:
        renderer.prepare(plan.frames[task.frame])
    for ahead in (1, 2):
        if new and new[-1].frame + ahead < len(plan.frames):
            renderer.prepare(plan.frames[new[-1].frame + ahead])


def _advance(renderer: TileRenderer, packer: Packer, link: WorkerLink, running: deque,
             packing: deque, counters, slots: SlotWriter | None = None) -> bool:
    """Hand finished launches to the packer and send packed tiles (those written in
    place once ``slots`` has made them durable); True if any moved."""
    moved = False
    while running and renderer.done(running[0][1]):
        task, launch = running.popleft()
        try:
            packing.append((task, packer.submit(renderer.collect(launch), link.rank, counters.values())))
        except Exception:
            link.failed(task, traceback.format_exc())
        moved = True
    while packing and packing[0][1].done():
        task, future = packing.popleft()
        try:
            result = future.result()
            if result.in_place and slots is not None:
                slots.submit((task, result))  # sent below once durable
            else:
                _send(link, counters, task, result)
        except Exception:
            link.failed(task, traceback.format_exc())
        moved = True
    if slots is not None and slots.ready():
        durable, failed = slots.take()
        if failed:  # not known to be on disk: the master writes their bytes, and later ones'
            packer.slots = None
            print(f"farm: rank {link.rank}: syncing the store failed ({slots.error}); its tiles "
                  "go to the master", file=sys.stderr)
        sends = [(task, r.record()) for task, r in durable]  # then the master writes `done`
        sends += [(task, dataclasses.replace(r, in_place=False)) for task, r in failed]
        for task, result in sends:
            _send(link, counters, task, result)
        moved = True
    return moved


def _send(link: WorkerLink, counters, task: Task, result) -> None:
    """A tile's result to the master; one that cannot be sent fails its tile."""
    try:
        with counters.timing("send"):
            link.result(task, result)
    except Exception:
        link.failed(task, traceback.format_exc())


def _wait(renderer: TileRenderer, running: deque, packing: deque, slots: SlotWriter | None = None,
          timeout: float = 0.05) -> None:
    """Sleep-poll until the oldest launch or the oldest packing is done, or tiles written
    in place are durable, or ``timeout`` (then the loop looks for messages). Sleeping
    releases the interpreter lock, which the packing threads share."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (running and renderer.done(running[0][1])) or (packing and packing[0][1].done()):
            return
        if slots is not None and slots.ready():
            return
        time.sleep(POLL_S)
