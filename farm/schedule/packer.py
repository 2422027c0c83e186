"""What follows a kernel, off the launch path: histogram, compression, checksum.

A GPU finishes a 1080p frame in a few milliseconds; compressing its 16 MB takes one
core tens of milliseconds. So a worker never packs on its own thread: it hands each
finished launch (:class:`~farm.compute.render.Collected`, the results still in the
slot's pinned memory; for a compressed store already shuffled by the device) to a
:class:`Packer`, whose threads turn it into what the store takes
(:class:`~farm.store.writer.Finished`: the tile's histogram, its channels encoded with
the store's codec, farm/store/codec.py, and their checksum) and free the slot.
The worker keeps launching meanwhile and sends each packed tile as it comes. A worker
that writes its tiles into the store itself (under MPI, where it sees the store:
farm/store/inplace.py) gives the packer its :class:`~farm.store.inplace.SlotWriter`:
each tile is then written into its slots on the packing thread too (the result says
``in_place``); should a write fail, the worker stops writing in place and the tile
travels with its bytes, as without one.

One packer per process: in one process its threads serve every GPU's worker thread.
zstd, crc32 and numpy's copies release the interpreter lock, so the threads pack in
parallel. The number of threads is the process's share of the cores (those it may use,
divided among the node's worker processes) less one per device it drives (each device's
thread), at least one and at most ``MAX_PACK_THREADS``, or ``FARM_PACK_THREADS``.

Why a ceiling: the threads share the process's interpreter lock with the threads that
receive prepared frames from the helper processes (farm/compute/prep.py), which are on
the GPU's critical path. Each packing thread takes the lock between its zstd calls, and
with 31 of them (a 32-core machine) a worker of the 1080p minibrot zoom waited 7-10 s
of a 10-13 s render phase for frames whose preparation takes 1 s; lowering the packing
threads' priority (nice 10) changed nothing, so it is the lock, not the cores. Render
phase by packing threads on the 2-GPU H100 machine (BENCHMARKS.md, "Scaling over
GPUs"): one GPU 9.7-12.7 s (31), 4.0 (4), 4.3 (8), 4.3 (12), 4.2 (16); two GPUs 4.9 s
(30), 4.6 (16), 3.6 (8); the 4K zoom 2.3 s with 8 or 31.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import sys

from farm.compute.render import Collected
from farm.plan import Plan
from farm.runtime.cores import usable_cores
from farm.store.codec import Codec, pack, pack_planes
from farm.store.inplace import SlotWriter
from farm.store.writer import Finished

MAX_PACK_THREADS = 8  # see the module's docstring


def pack_threads(devices: int = 1, processes: int = 1) -> int:
    """Packing threads for a process that drives ``devices`` devices, one of ``processes``
    worker processes sharing this node's cores: its share of them, less a core for each
    device's driving thread, at most MAX_PACK_THREADS (``FARM_PACK_THREADS`` overrides)."""
    wanted = os.environ.get("FARM_PACK_THREADS", "").strip()
    if wanted:
        return max(1, int(wanted))
    return max(1, min(MAX_PACK_THREADS, usable_cores() // max(1, processes) - devices))


class Packer:
    """Packs collected launches on a pool of threads (see the module docstring)."""

    def __init__(self, plan: Plan, codec: Codec, threads: int, slots: SlotWriter | None = None):
        self.plan, self.codec, self.threads = plan, codec, threads
        self.slots = slots  # the store, where this worker writes its tiles itself
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="farm-pack")

    def submit(self, collected: Collected, rank: int,
               counters: tuple[float, ...]) -> concurrent.futures.Future[Finished]:
        return self._pool.submit(self._pack, collected, rank, counters)

    def _pack(self, c: Collected, rank: int, counters: tuple[float, ...]) -> Finished:
        try:
            bins, counts = c.histogram()
            grid = self.plan.grid
            if c.shuffled:  # the device shuffled the chunks: compress the planes as they are
                packed = pack_planes(self.codec, c.blocks)
            else:
                packed = pack(self.codec, c.blocks, (c.tile.height, c.tile.width), (grid.tile_h, grid.tile_w))
        finally:
            c.release()
        done = Finished(c.frame.index, c.tile.index, packed.payloads, bins, counts, c.kernel_seconds,
                        rank, packed.crc, counters)
        return self._write(done) if self.slots is not None else done

    def _write(self, done: Finished) -> Finished:
        """The tile into its slots (the result says ``in_place``), or as it was where
        that fails: then this worker sends every later tile too."""
        slots = self.slots
        if slots is None:
            return done
        try:
            slots.write(done.frame, done.tile, done.payloads)
        except OSError as err:
            if self.slots is not None:
                self.slots = None
                print(f"farm: rank {done.rank} cannot write tiles into {slots.path} ({err.strerror or err}); "
                      "it sends them to the master", file=sys.stderr)
            return done
        return dataclasses.replace(done, in_place=True)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
