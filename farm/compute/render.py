"""Render tiles on one OpenCL device: ``TileRenderer.render(frame, tile) -> TileResult``.

:class:`TileRenderer` coordinates the pieces of a launch, each in a module of its own:

* farm/compute/program_choice.py: which program renders a frame (its kernel family and
  build options), built once per renderer and key;
* farm/compute/kernel_args.py: the kernel's leading arguments per frame (coordinate
  axes, a perturbed frame's orbit and skip table, a polar tile's offsets);
* farm/compute/slots.py: the ring of slots, each the device buffers and pinned host
  memory of one launch in flight;
* farm/compute/readback.py: the read-backs behind each kernel, and the results made
  from them (farm/compute/histogram.py: the tile's histogram);
* farm/compute/reaper.py: launches a stop abandoned on the device.

A launch covers one tile. ``launch`` enqueues the uploads, the kernel and the
readbacks into pinned (page-locked) host memory, all on one in-order queue, and
returns at once: DMA into pinned memory is truly asynchronous, so the readback runs
right behind its kernel while the next kernels wait in the queue. ``finish`` waits
for the readbacks and copies the tile out of the pinned staging arrays. Keeping a
few launches in flight lets the device compute one tile while the host hands the
previous one on (the worker does this). On CPUs perturbed frames with double deltas
run kernels/perturb_lanes.cl (LaunchConfig.lanes).

Expmap units (farm/plan/units.py): a tile slot computes its region, at the slot's
top-left, and the rest of the slot is filler (count 0, offset 0; counted in the
tile's histogram as count 0, as the stored bytes say). An empty slot launches no
kernel.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import numpy as np
import pyopencl as cl

from farm.compute import clstart, programs
from farm.compute.events import wait_quietly
from farm.compute.inventory import DeviceInfo
from farm.compute.kernel_args import KernelArgs, Spares
from farm.compute.launch import LaunchConfig
from farm.compute.prep import FramePrep
from farm.compute.program_choice import ProgramChoice
from farm.compute.program_choice import build_ahead as build_ahead  # (farm/run imports it from here)
from farm.compute.readback import Collected, Readback, TileResult
from farm.compute.reaper import abandon
from farm.compute.reaper import kernels_abandoned as kernels_abandoned  # (farm/cli asks it here)
from farm.compute.slots import Launch, Slot, new_slot
from farm.plan import FramePlan, Plan, Tile
from farm.plan.reference_types import References
from farm.plan.units import EMPTY, Region
from farm.runtime.timeline import Counters


class TileRenderer:
    """Renders tiles of one plan on one device (one context, one in-order queue)."""

    def __init__(self, device: cl.Device, info: DeviceInfo, plan: Plan,
                 config: LaunchConfig | None = None, slots: int = 4,
                 references: References | None = None, skipping: bool = True,
                 prep: FramePrep | None = None, interior: bool | None = None,
                 count_steps: bool = False, shuffle: bool = False):
        """``prep`` shares per-frame host work with the process's other renderers (made
        for this one alone when not given). ``skipping`` and ``interior`` (the early
        stop of pixels attracted to a nucleus' cycle; None: the device's choice,
        LaunchConfig.interior) can be turned off for
        measurements; ``count_steps`` (benchmarks) adds TileResult.arrays["steps"], the
        loop passes per pixel of perturbed frames (with the one-pixel loop). ``shuffle``
        (a compressed store's workers): the device also shuffles each channel's chunk
        (kernels/shuffle.cl) and :meth:`collect` gives those byte planes; :meth:`finish`
        and :meth:`render` need it off."""
        self.info = info
        self.plan = plan
        self.counters = Counters()  # kernel builds and per-frame preparation, in seconds
        self.config = config or LaunchConfig.for_device(info)
        self.choice = ProgramChoice.choose(device, plan, self.config, interior, count_steps)
        self.interior = self.choice.interior
        self.ctx = clstart.context(device)  # made beside the reference orbit where it could be
        self.queue = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.options = self.choice.options
        self.hist_dtype = np.int64 if "-DHIST64" in self.options else np.uint32
        self._kernels: dict[str, cl.Kernel] = {}
        self.shuffle = shuffle
        # rows longer than HIST_STAGED: the device finds each tile's highest count
        top = self.choice.hist_top()
        self._hist_top = cl.Kernel(programs.build(self.ctx, *top), "hist_top") if top else None
        # blocking copies off the launching thread, on a queue of their own (the
        # renderer's queue has the next tiles' kernels in it): per-frame skip tables, made
        # ahead (a buffer made with COPY_HOST_PTR was copied inside the first launch that
        # used it, on the launching thread: 8.6 ms a launch for a 23 MB table on an H100),
        # and the histogram bins past HIST_STAGED, read by the packing threads
        self._side_queue = cl.CommandQueue(self.ctx)
        self._shuffler = (cl.Kernel(programs.build(self.ctx, ("shuffle.cl",)), "byte_planes") if shuffle
                          else None)
        self._slots = [self._new_slot() for _ in range(slots)]
        self.skipping = skipping
        self.count_steps = count_steps
        self.references = references
        if count_steps:
            npix = plan.grid.tile_w * plan.grid.tile_h
            for slot in self._slots:
                slot.steps = cl.Buffer(self.ctx, cl.mem_flags.WRITE_ONLY, 4 * npix)
        # per-frame kernel arguments (perturbed frames' device buffers: made as their
        # preparation completes, on whichever thread completes it; kept for the last few)
        self._args = KernelArgs(self.ctx, self.queue, self._side_queue, plan, references, self.counters,
                                self._host_state, count_steps)
        # per-frame host state (coordinate axes, or a perturbed frame's arguments),
        # built ahead of need
        self._own_prep = prep is None
        self._prep = prep or FramePrep(plan, references, skipping, interior=self.interior,
                                       high_degree=self.config.high_degree,
                                       processes=self.config.prep_processes)
        self._readback = Readback(self.queue, self._side_queue, plan, self.hist_dtype, info.compute_units,
                                  self._hist_top, self._shuffler, shuffle)
        self._in_flight: dict[int, Launch] = {}  # launched, not yet finished or collected

    @property
    def _device_args(self) -> dict[int, tuple[list, list, list]]:
        """The perturbed frames whose device arguments this renderer holds (KernelArgs)."""
        return self._args.device_args

    @property
    def _spares(self) -> Spares:
        """Dropped frames' table buffers, used again (KernelArgs)."""
        return self._args.spares

    # ----------------------------------------------------------------- per-frame state
    def prepare(self, frame: FramePlan) -> concurrent.futures.Future:
        """Start the frame's host-side preparation (once per process, see
        :class:`FramePrep`); the worker calls this for the frames of the tiles it has
        queued, so the host work of a new frame overlaps the kernels of the one before."""
        future = self._prep.prepare(frame)
        self._args.upload_when_prepared(frame, future)
        return future

    def _host_state(self, frame: FramePlan) -> Any:
        """The frame's prepared host state; the wait is the worker's "prep" time."""
        future = self.prepare(frame)
        if future.done():
            return future.result()
        with self.counters.timing("prep"):
            return future.result()

    def axes(self, frame: FramePlan) -> tuple[np.ndarray, np.ndarray]:
        """(xs, ys) of the whole frame in a direct format: every (column, sample) and
        (row, sample), sample k of column i at i * N + k."""
        return self._host_state(frame)

    # ----------------------------------------------------------------- launches
    def _kernel(self, frame: FramePlan) -> cl.Kernel:
        key, sources, options = self.choice.kernel(frame)
        if key not in self._kernels:
            with self.counters.timing("build"):
                self._kernels[key] = cl.Kernel(programs.build(self.ctx, sources, options), "mandel")
        return self._kernels[key]

    def region(self, frame: FramePlan, tile: Tile) -> Region:
        """What the kernel computes of ``tile``: all of it, or an expmap unit's region."""
        if self.plan.layout is None:
            return Region("tile", tile.width, tile.height, tile.x0, tile.y0)
        return self.plan.layout.region(frame.index, tile.index)

    def launch(self, frame: FramePlan, tile: Tile) -> Launch:
        slot = next((s for s in self._slots if not s.busy), None)
        if slot is None:
            raise RuntimeError(f"more than {len(self._slots)} launches in flight")
        slot.busy = True
        try:
            region = self.region(frame, tile)
            q = self.queue
            if region.kind == EMPTY:  # filler only: nothing to compute
                return Launch(frame, tile, None, [cl.enqueue_marker(q)], slot, (), region)
            npix = region.pixels
            hist_bytes = frame.bins * np.dtype(self.hist_dtype).itemsize
            args, uploads, keep = self._args.for_region(frame, region, slot)
            uploads.append(cl.enqueue_fill_buffer(q, slot.hist, np.zeros(1, self.hist_dtype), 0, hist_bytes))

            work = -(-npix * self.plan.samples // self.choice.lanes(frame))  # work-items needed
            global_size = self.config.global_size(work, self.info.compute_units)
            kev = self._kernel(frame)(q, (global_size,), (self.config.local_size,), *args,
                                      np.uint32(region.width),
                                      np.uint32(npix), np.uint32(frame.max_iter),
                                      *slot.outputs, slot.hist, wait_for=uploads)
            readbacks = self._readback.enqueue(slot, frame, region)
            q.flush()
            launched = Launch(frame, tile, kev, readbacks, slot, keep, region, tuple(uploads))
            self._in_flight[id(launched)] = launched
            self._args.drop_frames()
            return launched
        except BaseException:  # nothing was launched: the slot is free again
            slot.busy = False
            raise

    # ----------------------------------------------------------------- slots
    def _new_slot(self) -> Slot:
        return new_slot(self.ctx, self._side_queue, self.plan, self.hist_dtype, self.shuffle,
                        long_rows=self._hist_top is not None)

    @property
    def slot_count(self) -> int:
        """Slots made so far."""
        return len(self._slots)

    def free_slots(self) -> int:
        """Launches that can start now (slots not busy computing or being packed)."""
        return sum(not s.busy for s in self._slots)

    def ensure_slots(self, n: int) -> None:
        """At least ``n`` slots (launches on the device plus results being packed). May
        run on another thread while this one launches: each slot joins the others
        (free) once it is made."""
        while len(self._slots) < n:
            self._slots.append(self._new_slot())

    # ----------------------------------------------------------------- results
    @staticmethod
    def done(launch: Launch) -> bool:
        complete = cl.command_execution_status.COMPLETE
        return all(e.command_execution_status == complete for e in launch.readbacks)

    def finish(self, launch: Launch) -> TileResult:
        """Wait for the readbacks, copy the tile out of the staging arrays, free the slot.

        A region smaller than the tile is placed at its top-left and the rest filled
        with zeros, which the tile's histogram counts as count 0. (Not for a shuffling
        renderer: its staging holds byte planes.)"""
        if self.shuffle:
            raise RuntimeError("finish() reads the channels as they are: make the renderer without shuffle")
        try:
            wait_quietly(launch.readbacks)
        except BaseException:
            launch.slot.busy = False
            raise
        self._in_flight.pop(id(launch), None)
        return self._readback.result(launch, self.counters)

    def collect(self, launch: Launch) -> Collected:
        """A completed launch's results in place (:class:`Collected`); the slot stays
        busy until the caller releases it."""
        try:
            cl.wait_for_events(launch.readbacks)  # complete already: the worker polled
        except BaseException:
            launch.slot.busy = False
            raise
        self._in_flight.pop(id(launch), None)
        return self._readback.collected(launch)

    def render(self, frame: FramePlan, tile: Tile) -> TileResult:
        return self.finish(self.launch(frame, tile))

    def close(self) -> None:
        """Stop the frame preparation this renderer started (a helper process on GPUs).

        Launches still on the device (a stop abandoned them) are handed, with this
        renderer's context, to a thread that waits for them without holding the
        interpreter lock (farm/compute/reaper.py): freeing them here would wait for
        their kernels, which may run for minutes, with the lock held."""
        if self._in_flight:
            abandon(self, list(self._in_flight.values()))
            self._in_flight.clear()
        if self._own_prep:
            self._prep.close()
