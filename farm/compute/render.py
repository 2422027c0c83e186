"""Render tiles on one OpenCL device: ``TileRenderer.render(frame, tile) -> TileResult``.

A launch covers one tile. ``launch`` enqueues the uploads, the kernel and the
readbacks into pinned (page-locked) host memory, all on one in-order queue, and
returns at once: DMA into pinned memory is truly asynchronous, so the readback runs
right behind its kernel while the next kernels wait in the queue. ``finish`` waits
for the readbacks and copies the tile out of the pinned staging arrays. Keeping a
few launches in flight lets the device compute one tile while the host hands the
previous one on (the worker does this). Device buffers come from
a ring of ``slots`` sets allocated once: allocating and freeing buffers per tile
(a free synchronises the device on NVIDIA's OpenCL) left the GPUs of a 4-GPU farm
idle a third of the time (BENCHMARKS.md).

Coordinates: per frame, the real part of every pixel column and the imaginary part
of every row are computed once in mpmath and rounded once into the frame's format
(:mod:`farm.numerics.encode`); a tile takes its slice of those axes. With ``N``
samples per pixel the axes hold every (column, sample) and (row, sample), column
``i``'s samples at ``i * N .. i * N + N - 1`` (:mod:`farm.numerics.axes`, offsets from
:mod:`farm.plan.samples`), and the kernel is built with ``-DSAMPLES=N``; the distance
estimate adds ``-DDISTANCE`` and the pixel spacing as a kernel argument. Perturbed frames
instead get the reference orbit (uploaded once per renderer), the half pixel
spacing as mantissa and exponent (the kernel forms each pixel's offset itself), and
the frame's table for skipping iterations (farm/numerics/bla.py; built once per
frame, kept for the last few).
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np
import pyopencl as cl
import pyopencl.cltypes as clt

import farm.numerics as num
from farm.compute import programs
from farm.compute.device import DeviceInfo
from farm.numerics.axes import encode_exact, exact_axis, sample_axis
from farm.numerics.bla import bla_table
from farm.numerics.encode import ENCODERS
from farm.plan import FramePlan, Plan, Tile, precision
from farm.plan import samples as sample_pattern
from farm.timeline import Counters


@dataclass(frozen=True)
class LaunchConfig:
    """Work-group size, how many groups per compute unit a launch may use, and the
    bins of the local-memory sub-histogram.

    The global size is ``min(pixels rounded up to local_size, groups_per_unit *
    compute_units * local_size)``; each work-item takes every G-th pixel. Counts
    below ``local_bins`` are counted in local memory, the rest with global atomics.
    """

    local_size: int = 128
    groups_per_unit: int = 16
    local_bins: int = 2048

    @classmethod
    def for_device(cls, info: DeviceInfo) -> LaunchConfig:
        if info.kind == "GPU":  # the best of the sweep in BENCHMARKS.md (H200)
            return cls(local_size=256, groups_per_unit=32)
        return cls(local_size=64, groups_per_unit=4)


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
    counters: tuple[float, ...] = ()  # the worker's running totals (farm.timeline.WORKER_COUNTERS)

    @property
    def iterations(self) -> np.ndarray:
        return self.arrays["iterations"]

    @property
    def fraction(self) -> np.ndarray:
        return self.arrays["fraction"]


@dataclass
class _Slot:
    """Device buffers for one launch in flight, sized for the largest tile, and pinned
    host arrays the results are read back into."""

    xs: cl.Buffer
    ys: cl.Buffer
    outputs: list[cl.Buffer]  # one per channel, in the plan's order
    hist: cl.Buffer
    staging: list[np.ndarray]  # pinned: one per channel, then the histogram
    pinned: list[cl.Buffer]  # the host buffers behind staging (kept mapped)
    busy: bool = False


@dataclass
class _Launch:
    frame: FramePlan
    tile: Tile
    kernel_event: cl.Event
    readbacks: list[cl.Event]
    slot: _Slot
    uploads: tuple[np.ndarray, ...]  # kept alive until the non-blocking uploads are done


def _scalar(fmt: str, value: object) -> np.generic:
    """A COORD_T kernel argument from an mpf (a double, or a uint4/float4 vector)."""
    enc = ENCODERS[fmt]([value])
    if fmt == "f64":
        return np.float64(enc[0])
    vector = clt.uint4 if fmt == "fp128" else clt.float4  # (4,) words viewed as one vector
    return np.ascontiguousarray(enc[0]).view(vector)[0]


def channel_options(plan: Plan) -> tuple[str, ...]:
    """Build options for the plan's channels: -DSAMPLES=N (N > 1), -DDISTANCE."""
    opts: tuple[str, ...] = ()
    if plan.samples > 1:
        opts += (f"-DSAMPLES={plan.samples}",)
    if plan.spec.render.distance:
        opts += ("-DDISTANCE",)
    return opts


class TileRenderer:
    """Renders tiles of one plan on one device (one context, one in-order queue)."""

    def __init__(self, device: cl.Device, info: DeviceInfo, plan: Plan,
                 config: LaunchConfig | None = None, slots: int = 4,
                 reference: np.ndarray | None = None, skipping: bool = True,
                 prep: FramePrep | None = None):
        """``prep`` shares per-frame host work with the process's other renderers (made
        for this one alone when not given)."""
        self.info = info
        self.plan = plan
        self.counters = Counters()  # kernel builds and per-frame preparation, in seconds
        self.config = config or LaunchConfig.for_device(info)
        self.ctx = cl.Context([device])
        self.queue = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.options = programs.device_options(device, self.config.local_bins) + channel_options(plan)
        self.hist_dtype = np.int64 if "-DHIST64" in self.options else np.uint32
        self._kernels: dict[str, cl.Kernel] = {}
        self._slots = [self._new_slot() for _ in range(slots)]
        self.orbit: cl.Buffer | None = None
        self.orbit_len = 0
        self.skipping = skipping
        self._reference = reference
        r2 = num.escape_r2(plan.spec.iterations.escape_radius)
        self._r2_args = {fmt: np.float64(r2) if fmt == "perturb" else _scalar(fmt, r2)
                         for fmt in {f.precision for f in plan.frames}}
        if reference is not None:  # (L, 2) float64: Z(0) .. Z(L-1)
            orbit = np.ascontiguousarray(reference, dtype=np.float64)
            self.orbit = cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                   hostbuf=orbit)
            self.orbit_len = len(orbit)
        # per-frame host state (coordinate axes, or a perturbed frame's half spacing and
        # skip table), built ahead of need; the device buffers of the last few frames
        self._prep = prep or FramePrep(plan, reference, skipping)
        self._device_args: collections.OrderedDict[int, list] = collections.OrderedDict()

    def _new_slot(self) -> _Slot:
        mf, grid = cl.mem_flags, self.plan.grid
        npix, coord = grid.tile_w * grid.tile_h, 16  # the widest coordinate: uint4/float4
        shapes = [(npix * c.depth, np.dtype(c.dtype)) for c in self.plan.channels]
        shapes.append((self.plan.bins, np.dtype(self.hist_dtype)))
        pinned, staging = [], []
        flags: Any = cl.map_flags.READ | cl.map_flags.WRITE
        for count, dtype in shapes:
            buf = cl.Buffer(self.ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, count * dtype.itemsize)
            mapped: Any = cl.enqueue_map_buffer(self.queue, buf, flags, 0, (count,), dtype,
                                                is_blocking=True)
            pinned.append(buf)
            staging.append(mapped[0])
        outputs = [cl.Buffer(self.ctx, mf.WRITE_ONLY, c.nbytes(npix)) for c in self.plan.channels]
        per_axis = coord * self.plan.samples
        return _Slot(cl.Buffer(self.ctx, mf.READ_ONLY, per_axis * grid.tile_w),
                     cl.Buffer(self.ctx, mf.READ_ONLY, per_axis * grid.tile_h), outputs,
                     cl.Buffer(self.ctx, mf.READ_WRITE, 8 * self.plan.bins), staging, pinned)

    # ----------------------------------------------------------------- per-frame state
    def prepare(self, frame: FramePlan) -> concurrent.futures.Future:
        """Start the frame's host-side preparation (once per process, see
        :class:`FramePrep`); the worker calls this for the frames of the tiles it has
        queued, so the host work of a new frame overlaps the kernels of the one before."""
        return self._prep.prepare(frame)

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

    def _frame_args(self, frame: FramePlan) -> list:
        """The per-frame kernel arguments of a perturbed frame: the half pixel spacing
        (mantissa, exponent), the escape radius squared, then the frame's BLA table (ab,
        r, offsets buffers, levels), levels 0 (no skipping) when skipping is off. The
        table's device buffers are made once per renderer and frame."""
        args = self._device_args.get(frame.index)
        if args is None:
            h_m, h_e, ab, r, off, levels = self._host_state(frame)
            mf = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
            args = [np.float64(h_m), np.int32(h_e), self._r2_args["perturb"],
                    cl.Buffer(self.ctx, mf, hostbuf=ab), cl.Buffer(self.ctx, mf, hostbuf=r),
                    cl.Buffer(self.ctx, mf, hostbuf=off), np.uint32(levels)]
            self._device_args[frame.index] = args
            while len(self._device_args) > FramePrep.KEEP:
                self._device_args.popitem(last=False)
        return args


    # ----------------------------------------------------------------- launches
    def _kernel(self, frame: FramePlan) -> cl.Kernel:
        fmt = frame.precision
        extra: tuple[str, ...] = ()
        if fmt == "perturb" and frame.log10_spacing < precision.PERTURB_FX_BELOW_LOG10:
            extra = ("-DPERTURB_FX",)
        key = fmt + "".join(extra)
        if key not in self._kernels:
            with self.counters.timing("build"):
                prg = programs.build(self.ctx, (programs.FORMAT_SOURCES[fmt], "mandel.cl"),
                                     self.options + extra)
                self._kernels[key] = cl.Kernel(prg, "mandel")
        return self._kernels[key]

    def _format_args(self, frame: FramePlan, tile: Tile, slot: _Slot) -> tuple[list, list, tuple]:
        """(leading kernel arguments, upload events, host arrays to keep) of a launch."""
        if frame.precision == "perturb":
            if self.orbit is None:
                raise RuntimeError("a perturbed frame needs the reference orbit")
            w, h = self.plan.spec.size
            args = [self.orbit, np.uint32(self.orbit_len), np.int32(2 * tile.x0 + 1 - w),
                    np.int32(2 * tile.y0 + 1 - h), *self._frame_args(frame)]
            return args, [], ()
        xs, ys = self.axes(frame)
        n = self.plan.samples
        xs_t = np.ascontiguousarray(xs[tile.x0 * n:(tile.x0 + tile.width) * n])
        ys_t = np.ascontiguousarray(ys[tile.y0 * n:(tile.y0 + tile.height) * n])
        uploads = [cl.enqueue_copy(self.queue, slot.xs, xs_t, is_blocking=False),
                   cl.enqueue_copy(self.queue, slot.ys, ys_t, is_blocking=False)]
        args = [slot.xs, slot.ys, self._r2_args[frame.precision]]
        if self.plan.spec.render.distance:  # the pixel spacing: the derivative's unit
            args.append(np.float64(float(frame.spacing)))
        return args, uploads, (xs_t, ys_t)

    def launch(self, frame: FramePlan, tile: Tile) -> _Launch:
        slot = next((s for s in self._slots if not s.busy), None)
        if slot is None:
            raise RuntimeError(f"more than {len(self._slots)} launches in flight")
        slot.busy = True
        try:
            npix = tile.pixels
            q = self.queue
            hist_bytes = frame.bins * np.dtype(self.hist_dtype).itemsize
            args, uploads, keep = self._format_args(frame, tile, slot)
            uploads.append(cl.enqueue_fill_buffer(q, slot.hist, np.zeros(1, self.hist_dtype), 0, hist_bytes))

            local = self.config.local_size
            cap = self.config.groups_per_unit * self.info.compute_units * local
            global_size = min(-(-npix // local) * local, cap)
            kev = self._kernel(frame)(q, (global_size,), (local,), *args, np.uint32(tile.width),
                                      np.uint32(npix), np.uint32(frame.max_iter),
                                      *slot.outputs, slot.hist, wait_for=uploads)
            readbacks = [cl.enqueue_copy(q, stage[:npix * c.depth], buf, is_blocking=False)
                         for c, stage, buf in zip(self.plan.channels, slot.staging, slot.outputs,
                                                  strict=False)]
            readbacks.append(cl.enqueue_copy(q, slot.staging[-1][:frame.bins], slot.hist,
                                             is_blocking=False))
            q.flush()
            return _Launch(frame, tile, kev, readbacks, slot, keep)
        except BaseException:  # nothing was launched: the slot is free again
            slot.busy = False
            raise

    @staticmethod
    def done(launch: _Launch) -> bool:
        complete = cl.command_execution_status.COMPLETE
        return all(e.command_execution_status == complete for e in launch.readbacks)

    def finish(self, launch: _Launch) -> TileResult:
        """Wait for the readbacks, copy the tile out of the staging arrays, free the slot."""
        slot, tile, npix = launch.slot, launch.tile, launch.tile.pixels
        try:
            cl.wait_for_events(launch.readbacks)
        except BaseException:
            slot.busy = False
            raise
        arrays = {c.name: stage[:npix * c.depth].reshape(c.shape(tile.height, tile.width)).copy()
                  for c, stage in zip(self.plan.channels, slot.staging, strict=False)}
        hist = slot.staging[-1][:launch.frame.bins]
        bins = np.flatnonzero(hist)
        counts = hist[bins].astype(np.int64)
        slot.busy = False
        kev = launch.kernel_event
        seconds = (kev.profile.end - kev.profile.start) * 1e-9
        return TileResult(launch.frame.index, tile.index, arrays, bins.astype(np.int64), counts,
                          seconds, self.counters.values())

    def render(self, frame: FramePlan, tile: Tile) -> TileResult:
        return self.finish(self.launch(frame, tile))


class FramePrep:
    """Per-frame host work: coordinate axes (direct formats) or the half spacing and skip
    table (perturbation), built once per frame on a thread of its own and shared by
    every renderer of the process (one worker thread per GPU), the ``KEEP`` most recent
    frames kept. Thread-safe."""

    KEEP = 8

    def __init__(self, plan: Plan, reference: np.ndarray | None, skipping: bool = True):
        self.plan, self.reference, self.skipping = plan, reference, skipping
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="farm-prep")
        self._lock = threading.Lock()
        self._states: collections.OrderedDict[int, concurrent.futures.Future] = (
            collections.OrderedDict())

    def prepare(self, frame: FramePlan) -> concurrent.futures.Future:
        with self._lock:
            future = self._states.get(frame.index)
            if future is None:
                future = self._states[frame.index] = self._pool.submit(self._build, frame)
                while len(self._states) > self.KEEP:
                    self._states.popitem(last=False)
            else:
                self._states.move_to_end(frame.index)
            return future

    def _build(self, frame: FramePlan) -> Any:
        if frame.precision == "perturb":
            return self._perturbation(frame)
        return self._axes(frame)

    def _axes(self, frame: FramePlan) -> tuple[np.ndarray, np.ndarray]:
        spec = self.plan.spec
        w, h = spec.size
        cr, ci = spec.view.center
        fmt = frame.precision
        if self.plan.samples == 1:
            return (encode_exact(fmt, *exact_axis(cr, frame.spacing, w, +1, frame.bits)),
                    encode_exact(fmt, *exact_axis(ci, frame.spacing, h, -1, frame.bits)))
        offs = sample_pattern.offsets(self.plan.samples)  # (x right, y down) in 2^-16 px
        return (sample_axis(cr, frame.spacing, w, [o[0] for o in offs], +1, frame.bits, fmt),
                sample_axis(ci, frame.spacing, h, [o[1] for o in offs], -1, frame.bits, fmt))

    def _perturbation(self, frame: FramePlan) -> tuple:
        """(h_m, h_e, ab, r, offsets, levels) of a perturbed frame (see _frame_args)."""
        with num.workprec(frame.bits):
            h_m, h_e = num.frexp(frame.spacing / 2)
        levels = 0
        ab, r, off = np.zeros((1, 4)), np.zeros(1), np.zeros(2, dtype=np.uint32)
        if self.skipping and self.reference is not None:
            w, h = self.plan.spec.size
            with num.workprec(frame.bits):  # |dc| <= half spacing x diagonal in pixels
                dc_max = num.float_at_least(frame.spacing / 2 * mpmath.hypot(w, h))
            ab, r, off = bla_table(self.reference, dc_max)
            levels = len(off) - 1
            if levels == 0:
                ab, r, off = np.zeros((1, 4)), np.zeros(1), np.zeros(2, dtype=np.uint32)
        return (h_m, h_e, np.ascontiguousarray(ab, dtype=np.float64),
                np.ascontiguousarray(r, dtype=np.float64),
                np.ascontiguousarray(off, dtype=np.uint32), levels)


def wait_any(launch: _Launch, poll: float = 0.0002, deadline: float | None = None) -> bool:
    """Sleep-poll until ``launch`` completes or ``deadline`` (time.monotonic) passes."""
    while not TileRenderer.done(launch):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True
