"""A tile's results on their way back from the device: the read-backs enqueued behind
its kernel (:meth:`Readback.enqueue`), and, once they are complete, the tile copied
out as a :class:`TileResult` or handed on in place as a :class:`Collected`.

The read-backs go into the slot's pinned staging memory (farm/compute/slots.py) on the
renderer's in-order queue, right behind the tile's kernel; a shuffling renderer (a
compressed store's workers) first shuffles each channel's chunk into byte planes on
the device (kernels/shuffle.cl). A region smaller than the tile (an expmap unit's) is
at the tile's top-left; the rest of the tile is filler: zeros, counted in the tile's
histogram as count 0, as the stored bytes say. The histogram's row is read back in
part where it is long (farm/compute/histogram.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

from farm.compute.histogram import long_rows, staged_bins, tile_histogram
from farm.compute.slots import Launch, Slot
from farm.plan import FramePlan, Plan, Tile
from farm.plan.units import Region
from farm.runtime.timeline import Counters


@dataclass
class TileResult:
    """One rendered tile: one array per channel of the plan (farm/plan/channels.py), in
    the plan's order, each ``(tile.height, tile.width[, depth])`` row-major."""

    frame: int
    tile: int
    arrays: dict[str, np.ndarray]  # "iterations" uint32 (0: interior), "fraction" float32, ...
    hist_bins: np.ndarray  # int64 counts n that occur in the tile, ascending
    hist_counts: np.ndarray  # int64 pixels per bin
    kernel_seconds: float  # device time of the kernel (profiling events)
    counters: tuple[float, ...] = ()  # the worker's running totals (farm.runtime.timeline.WORKER_COUNTERS)

    @property
    def iterations(self) -> np.ndarray:
        return self.arrays["iterations"]

    @property
    def fraction(self) -> np.ndarray:
        return self.arrays["fraction"]


@dataclass
class Collected:
    """A finished launch's results where the device put them: views into the slot's
    pinned staging memory, valid until :meth:`release` (packing reads them there, so
    nothing is copied on the worker's thread)."""

    frame: FramePlan
    tile: Tile
    region: Region  # what the kernel computed, at the tile's top-left
    blocks: list[np.ndarray]  # per channel, (region.height, region.width[, depth]), or
    # (shuffled) the chunk's byte planes, uint8 (size * n,) (kernels/shuffle.cl)
    hist: np.ndarray | None  # the region's histogram (bins,), None: nothing computed
    kernel_seconds: float
    slot: Slot
    shuffled: bool = False
    top: int | None = None  # the highest count in hist when only its start was read back
    rest: Callable[[int, int], np.ndarray] | None = None  # reads hist bins a .. b-1 past it

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """(bins, counts) of the tile, int64: the region's, plus the filler outside it
        counted as count 0 (as the stored bytes say)."""
        return tile_histogram(self.hist, self.top, self.rest, self.tile.pixels - self.region.pixels)

    def release(self) -> None:
        """The slot's memory may be reused: the views are no longer valid."""
        self.blocks, self.hist = [], None
        self.slot.busy = False


class Readback:
    """The read-backs of one renderer's tiles: enqueued on ``queue`` (the renderer's,
    behind each kernel); histogram bins past the staged ones read on ``side_queue``.
    ``hist_top`` (rows longer than HIST_STAGED) and ``shuffler`` (``shuffle``) are the
    renderer's kernels."""

    def __init__(self, queue: cl.CommandQueue, side_queue: cl.CommandQueue, plan: Plan, hist_dtype: Any,
                 compute_units: int, hist_top: cl.Kernel | None, shuffler: cl.Kernel | None, shuffle: bool):
        self.queue = queue
        self.side_queue = side_queue
        self.plan = plan
        self.hist_dtype = hist_dtype
        self.compute_units = compute_units
        self.hist_top = hist_top
        self.shuffler = shuffler
        self.shuffle = shuffle

    def enqueue(self, slot: Slot, frame: FramePlan, region: Region) -> list[cl.Event]:
        """The read-backs of a tile of ``frame`` that computes ``region`` in ``slot``:
        its channels (or their byte planes), its histogram, and on long rows its highest
        count (behind the kernel that finds it)."""
        q, npix = self.queue, region.pixels
        if self.shuffle:
            readbacks = self._shuffled(slot, region)
        else:
            readbacks = [cl.enqueue_copy(q, stage[:npix * c.depth], buf, is_blocking=False)
                         for c, stage, buf in zip(self.plan.channels, slot.staging, slot.outputs,
                                                  strict=False)]
        readbacks.append(cl.enqueue_copy(q, self._staged_hist(slot, frame), slot.hist, is_blocking=False))
        if long_rows(frame.bins):
            readbacks.append(self._find_top(slot, frame.bins))
        return readbacks

    def _find_top(self, slot: Slot, bins: int) -> cl.Event:
        """Enqueue kernels/hist_top.cl on the slot's histogram (behind the tile's kernel)
        and the read-back of its result into ``slot.top_host``."""
        assert self.hist_top is not None and slot.top is not None and slot.top_host is not None
        q = self.queue
        cl.enqueue_fill_buffer(q, slot.top, np.zeros(1, np.uint32), 0, 4)
        items = min(-(-bins // 256) * 256, 256 * 256 * max(1, self.compute_units))
        self.hist_top(q, (items,), (256,), slot.hist, np.uint32(bins), slot.top)
        return cl.enqueue_copy(q, slot.top_host, slot.top, is_blocking=False)

    def _shuffled(self, slot: Slot, region: Region) -> list[cl.Event]:
        """Shuffle each channel's chunk on the device (kernels/shuffle.cl, behind the tile's
        kernel in the queue) and read the byte planes back into the slot's staging."""
        assert self.shuffler is not None and slot.planes is not None
        grid, q = self.plan.grid, self.queue
        out = []
        for c, buf, planes, stage in zip(self.plan.channels, slot.outputs, slot.planes, slot.staging,
                                         strict=False):
            n = grid.tile_w * grid.tile_h * c.depth
            size = np.dtype(c.dtype).itemsize
            self.shuffler(q, (-(-n // 256) * 256,), (256,), buf, planes, np.uint32(size),
                          np.uint32(c.depth), np.uint32(region.width), np.uint32(region.height),
                          np.uint32(grid.tile_w), np.uint32(grid.tile_h))
            out.append(cl.enqueue_copy(q, stage.view(np.uint8)[:n * size], planes, is_blocking=False))
        return out

    def _read_hist(self, slot: Slot, a: int, b: int) -> np.ndarray:
        """Bins a .. b-1 of the slot's histogram (its kernel finished), read on the side
        queue: called from packing threads while the slot is still busy."""
        out = np.empty(b - a, self.hist_dtype)
        cl.enqueue_copy(self.side_queue, out, slot.hist, src_offset=a * out.itemsize, is_blocking=True)
        return out

    @staticmethod
    def _staged_hist(slot: Slot, frame: FramePlan) -> np.ndarray:
        """The part of the slot's pinned staging that a tile of ``frame`` reads its
        histogram back into: its first HIST_STAGED bins at most."""
        return slot.staging[-1][:staged_bins(frame.bins)]

    def _tile_top(self, launch: Launch) -> tuple[int | None, Callable[[int, int], np.ndarray] | None]:
        """(top, rest) for :func:`tile_histogram`: (None, None) for rows read back whole."""
        slot = launch.slot
        if launch.kernel_event is None or not long_rows(launch.frame.bins) or slot.top_host is None:
            return None, None
        return int(slot.top_host[0]), functools.partial(self._read_hist, slot)

    def result(self, launch: Launch, counters: Counters) -> TileResult:
        """The tile of a launch whose read-backs are complete, copied out of the staging
        arrays (a region smaller than the tile at its top-left, the rest zeros), with
        ``counters``' running totals; frees the slot."""
        slot, tile, region = launch.slot, launch.tile, launch.region
        npix = region.pixels
        arrays = {}
        for c, stage in zip(self.plan.channels, slot.staging, strict=False):
            block = stage[:npix * c.depth].reshape(c.shape(region.height, region.width))
            if (region.height, region.width) == (tile.height, tile.width):
                arrays[c.name] = block.copy()
            else:
                arrays[c.name] = np.zeros(c.shape(tile.height, tile.width), c.dtype)
                arrays[c.name][:region.height, :region.width] = block
        if slot.steps is not None and launch.kernel_event is not None and \
                launch.frame.precision == "perturb":
            steps = np.empty(npix, np.uint32)
            cl.enqueue_copy(self.queue, steps, slot.steps, is_blocking=True)
            arrays["steps"] = steps.reshape(region.height, region.width)
        staged = self._staged_hist(slot, launch.frame) if launch.kernel_event is not None else None
        bins, counts = tile_histogram(staged, *self._tile_top(launch), tile.pixels - npix)
        slot.busy = False
        kev = launch.kernel_event
        seconds = 0.0 if kev is None else (kev.profile.end - kev.profile.start) * 1e-9
        return TileResult(launch.frame.index, tile.index, arrays, bins, counts,
                          seconds, counters.values())

    def collected(self, launch: Launch) -> Collected:
        """The results of a launch whose read-backs are complete, in place; the slot
        stays busy until the caller releases them."""
        slot, region = launch.slot, launch.region
        kev = launch.kernel_event
        shuffled = self.shuffle and kev is not None  # (an empty expmap slot ran nothing)
        if shuffled:
            n = self.plan.grid.tile_w * self.plan.grid.tile_h
            blocks = [stage.view(np.uint8)[:c.nbytes(n)]
                      for c, stage in zip(self.plan.channels, slot.staging, strict=False)]
        else:
            npix = region.pixels
            blocks = [stage[:npix * c.depth].reshape(c.shape(region.height, region.width))
                      for c, stage in zip(self.plan.channels, slot.staging, strict=False)]
        hist = None if kev is None else self._staged_hist(slot, launch.frame)
        seconds = 0.0 if kev is None else (kev.profile.end - kev.profile.start) * 1e-9
        top, rest = self._tile_top(launch)
        return Collected(launch.frame, launch.tile, region, blocks, hist, seconds, slot, shuffled,
                         top, rest)
