"""What follows a kernel, off the launch path: histogram, compression, checksum.

A GPU finishes a 1080p frame in a few milliseconds; compressing its 16 MB takes one
core tens of milliseconds. So a worker never packs on its own thread: it hands each
finished launch (:class:`~farm.compute.render.Collected`, the results still in the
slot's pinned memory; for a compressed store already shuffled by the device) to a
:class:`Packer`, whose threads turn it into what the store takes
(:class:`~farm.store.writer.Finished`: the tile's histogram, its channels encoded with
the store's codec, farm/store/codec.py, and their checksum) and free the slot.
The worker keeps launching meanwhile and sends each packed tile as it comes.

One packer per process: in one process its threads serve every GPU's worker thread.
zstd, crc32 and numpy's copies release the interpreter lock, so the threads pack in
parallel. The number of threads is the cores this process may use less one (the
worker's), at least one, or ``FARM_PACK_THREADS``.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time

from farm.compute.render import Collected
from farm.plan import Plan
from farm.store.codec import Codec, pack, pack_planes
from farm.store.writer import Finished


def usable_cores() -> int:
    """Cores this process may run on (its affinity, e.g. a Slurm allocation)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def pack_threads(workers_here: int = 1) -> int:
    """Packing threads for a process that drives ``workers_here`` devices (its share of
    the node when several processes share it: pass the node's workers per process)."""
    wanted = os.environ.get("FARM_PACK_THREADS", "").strip()
    if wanted:
        return max(1, int(wanted))
    return max(1, usable_cores() - workers_here)


class Packer:
    """Packs collected launches on a pool of threads (see the module docstring)."""

    def __init__(self, plan: Plan, codec: Codec, threads: int):
        self.plan, self.codec, self.threads = plan, codec, threads
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="farm-pack")
        self.busy_s = 0.0  # seconds of packing, summed over threads (the timeline's pack_s)
        self._lock = threading.Lock()

    def submit(self, collected: Collected, rank: int,
               counters: tuple[float, ...]) -> concurrent.futures.Future[Finished]:
        return self._pool.submit(self._pack, collected, rank, counters)

    def _pack(self, c: Collected, rank: int, counters: tuple[float, ...]) -> Finished:
        t0 = time.perf_counter()
        try:
            bins, counts = c.histogram()
            grid = self.plan.grid
            if c.shuffled:  # the device shuffled the chunks: compress the planes as they are
                packed = pack_planes(self.codec, c.blocks)
            else:
                packed = pack(self.codec, c.blocks, (c.tile.height, c.tile.width), (grid.tile_h, grid.tile_w))
        finally:
            c.release()
        with self._lock:
            self.busy_s += time.perf_counter() - t0
        return Finished(c.frame.index, c.tile.index, packed.payloads, bins, counts, c.kernel_seconds,
                        rank, packed.crc, counters)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
