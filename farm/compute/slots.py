"""A tile renderer's launches in flight: the device buffers and pinned host memory of
one launch (:class:`Slot`, made by :func:`new_slot`), and what a launch holds until it
is finished or collected (:class:`Launch`).

Device buffers come from a ring of slots allocated once (farm/compute/render.py):
allocating and freeing buffers per tile (a free synchronises the device on NVIDIA's
OpenCL) left the GPUs of a 4-GPU farm idle a third of the time (BENCHMARKS.md). Each
slot is sized for the largest tile of the plan; its results are read back into pinned
(page-locked) host memory, whose DMA is truly asynchronous.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl

from farm.compute.histogram import staged_bins
from farm.plan import FramePlan, Plan, Tile
from farm.plan.units import Region


@dataclass
class Slot:
    """Device buffers for one launch in flight, sized for the largest tile, and pinned
    host arrays the results are read back into."""

    xs: cl.Buffer
    ys: cl.Buffer
    outputs: list[cl.Buffer]  # one per channel, in the plan's order
    hist: cl.Buffer
    staging: list[np.ndarray]  # pinned: one per channel, then the histogram
    pinned: list[cl.Buffer]  # the host buffers behind staging (kept mapped)
    top: cl.Buffer | None = None  # the histogram's highest count (long rows only)
    top_host: np.ndarray | None = None  # ... read back here
    steps: cl.Buffer | None = None  # loop passes per pixel (count_steps only)
    planes: list[cl.Buffer] | None = None  # per channel, the shuffled chunk (shuffle only)
    busy: bool = False


@dataclass
class Launch:
    """One launch in flight (farm/compute/render.py, ``TileRenderer.launch``), until it
    is finished or collected."""

    frame: FramePlan
    tile: Tile
    kernel_event: cl.Event | None  # None: an empty slot, nothing computed
    readbacks: list[cl.Event]
    slot: Slot
    uploads: tuple[np.ndarray, ...]  # kept alive until the non-blocking uploads are done
    region: Region  # what the kernel computed, at the tile's top-left
    # The uploads' events, kept until the tile is finished: pyopencl's event of a copy
    # from host memory (a NannyEvent) waits for that copy when it is deleted, holding the
    # interpreter lock, and on an in-order queue the copy waits for every kernel before
    # it. Dropped at the end of ``launch``, it froze every thread of the process for a
    # whole kernel (a stop signal waited for minutes on PoCL; tests/test_stop.py).
    events: tuple[cl.Event, ...] = ()


def new_slot(ctx: cl.Context, side_queue: cl.CommandQueue, plan: Plan, hist_dtype: Any,
             shuffle: bool, long_rows: bool) -> Slot:
    """A slot for tiles of ``plan`` on ``ctx``: its pinned staging mapped on
    ``side_queue`` (a slot made while kernels run is not made behind them); ``shuffle``:
    the outputs are also read by the shuffle and each channel has its byte planes;
    ``long_rows``: the histogram's highest count is found on the device."""
    mf, grid = cl.mem_flags, plan.grid
    npix, coord = grid.tile_w * grid.tile_h, 16  # the widest coordinate: uint4/float4
    shapes = [(npix * c.depth, np.dtype(c.dtype)) for c in plan.channels]
    shapes.append((staged_bins(plan.bins), np.dtype(hist_dtype)))
    pinned, staging = [], []
    flags: Any = cl.map_flags.READ | cl.map_flags.WRITE
    for count, dtype in shapes:
        buf = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, count * dtype.itemsize)
        mapped: Any = cl.enqueue_map_buffer(side_queue, buf, flags, 0, (count,), dtype, is_blocking=True)
        pinned.append(buf)
        staging.append(mapped[0])
    written = mf.READ_WRITE if shuffle else mf.WRITE_ONLY  # the shuffle reads them
    outputs = [cl.Buffer(ctx, written, c.nbytes(npix)) for c in plan.channels]
    planes = [cl.Buffer(ctx, mf.READ_WRITE, c.nbytes(npix)) for c in plan.channels] if shuffle else None
    per_axis = coord * plan.samples * (2 if any(f.rotated for f in plan.frames) else 1)
    return Slot(cl.Buffer(ctx, mf.READ_ONLY, per_axis * grid.tile_w),
                cl.Buffer(ctx, mf.READ_ONLY, per_axis * grid.tile_h), outputs,
                cl.Buffer(ctx, mf.READ_WRITE, 8 * plan.bins), staging, pinned,
                top=cl.Buffer(ctx, mf.READ_WRITE, 4) if long_rows else None,
                top_host=np.zeros(1, np.uint32) if long_rows else None, planes=planes)
