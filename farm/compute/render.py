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
(:mod:`farm.numerics.encode`); a tile takes its slice of those axes. A turned frame
(an angle) has two terms a column and two a row instead, (A_re, A_im) and (B_re, B_im)
interleaved, each rounded once, which the kernel adds (-DROTATED, with the angle's
(cos, sin) as a double2 after the format's arguments for the distance estimate's
direction; farm/numerics/axes.py); a turned perturbed frame gets that (cos, sin) after
its flat tile's arguments (farm/compute/perturbation.py). With ``N``
samples per pixel the axes hold every (column, sample) and (row, sample), column
``i``'s samples at ``i * N .. i * N + N - 1`` (:mod:`farm.numerics.axes`, offsets from
:mod:`farm.plan.samples`), and the kernel is built with ``-DSAMPLES=N``; the distance
estimate adds ``-DDISTANCE`` and the pixel spacing as a kernel argument. Perturbed frames
instead get their reference's orbit (farm/plan/references.py; each uploaded once per
renderer), the half pixel spacing as mantissa and exponent and the view centre's
offset from the reference in half spacings (the kernel forms each pixel's offset
itself; with samples, also the sample offsets of farm/plan/samples.py, from which it
forms each sample's; the distance estimate's unit, the spacing, is twice the half
spacing), the frame's table for skipping iterations (farm/numerics/bla.py) and, for a
nucleus reference, lambda' for the interior test (farm/compute/perturbation.py; built
once per frame, kept for the last few). On CPUs perturbed frames with double deltas
run kernels/perturb_lanes.cl (LaunchConfig.lanes).

Expmap units (farm/plan/units.py): a tile slot computes its region, at the slot's
top-left, and the rest of the slot is filler (count 0, offset 0; counted in the
tile's histogram as count 0, as the stored bytes say). A strip region is a *polar
tile*: perturbation with each pixel's offset from the zoom centre given per tile as
row radii (mantissas sharing one exponent, so floatexp reaches any depth) and column
(cos, sin) (kernels/perturb.cl built with -DPOLAR); a centre-image region is a flat
tile of the centre image, in its format. An empty slot launches no kernel.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.cltypes as clt

import farm.numerics as num
from farm.compute import clstart, programs
from farm.compute.device import DeviceInfo
from farm.compute.events import wait_quietly
from farm.compute.launch import LaunchConfig
from farm.compute.perturbation import PerturbedFrame, frame_orbit
from farm.compute.prep import FramePrep
from farm.numerics.bla import COLUMNS, device_layout
from farm.numerics.encode import ENCODERS
from farm.plan import FramePlan, Plan, Tile, precision
from farm.plan import samples as sample_pattern
from farm.plan.expmap import TWO_PI
from farm.plan.references import References
from farm.plan.units import CENTRE, EMPTY, STRIP, Region
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


# Histogram bins read back with every tile. A plan whose rows are longer (a deep zoom's
# limit is up to 10^7 counts: 80 MB a tile) also runs kernels/hist_top.cl behind each
# tile: the host scans the bins up to the tile's highest count, and reads the bins past
# HIST_STAGED only when that count lies there (:func:`tile_histogram`).
HIST_STAGED = 1 << 20


def tile_histogram(staged: np.ndarray | None, top: int | None,
                   rest: Callable[[int, int], np.ndarray] | None,
                   filler: int) -> tuple[np.ndarray, np.ndarray]:
    """(bins, counts), int64, of a tile (:func:`sparse_histogram`) from what was read
    back: ``staged`` the row's first bins (all of them when ``top`` is None); ``top``
    the highest bin holding a count (kernels/hist_top.cl); ``rest(a, b)`` reads bins
    a .. b-1 from the device."""
    if staged is None or top is None:
        return sparse_histogram(staged, filler)
    bins, counts = sparse_histogram(staged[:top + 1], filler)
    if top >= len(staged) and rest is not None:
        tail = rest(len(staged), top + 1)
        nz = np.flatnonzero(tail)
        bins = np.concatenate([bins, nz.astype(np.int64) + len(staged)])
        counts = np.concatenate([counts, tail[nz].astype(np.int64)])
    return bins, counts


def sparse_histogram(hist: np.ndarray | None, filler: int) -> tuple[np.ndarray, np.ndarray]:
    """(bins, counts), int64, of a tile: the non-zero entries of the region's histogram
    as the device left it (``hist``: a view of the staging memory, None when nothing was
    computed), plus ``filler`` pixels outside the region counted as count 0. One pass
    over ``hist`` and nothing as long as it: a deep frame's row has up to 10^7 bins."""
    bins = np.flatnonzero(hist) if hist is not None else np.zeros(0, np.intp)
    counts = hist[bins].astype(np.int64) if hist is not None else np.zeros(0, np.int64)
    bins = bins.astype(np.int64)
    if filler:
        if len(bins) and bins[0] == 0:
            counts[0] += filler
        else:
            bins, counts = np.concatenate([[0], bins]), np.concatenate([[filler], counts])
    return bins, counts


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
    slot: _Slot
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


class _Spares:
    """Device buffers of dropped frames' arguments, kept to be used again.

    Releasing a buffer on NVIDIA's OpenCL waits for the device's queued work and holds
    the interpreter's lock meanwhile (py-spy on an H200: 1.4 s of a render phase of
    about 3.3 s for the 360-frame minibrot zoom, 3.8 ms at each frame's skip table,
    while the launching thread waited for the lock). So a frame's buffers are retired
    behind a marker on the renderer's queue, enqueued by the launching thread after
    every kernel that may read them, and once the device is past it they serve an upload
    of the same size. At most ``KEEP`` spare buffers, as many as the frames whose
    arguments are kept hold (frames are prepared ahead in bursts, so as many are retired
    at once): beyond that the oldest are released (frames of other sizes: a new
    reference, a deeper table). Thread-safe."""

    KEEP = 2 * FramePrep.KEEP

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._retired: collections.deque[tuple[cl.Event, list[cl.Buffer]]] = collections.deque()
        self._free: collections.deque[cl.Buffer] = collections.deque()

    def retire(self, buffers: list[cl.Buffer], marker: cl.Event | None) -> None:
        """Keep ``buffers`` for reuse once ``marker`` is complete (None: no kernel read them)."""
        with self._lock:
            if marker is None:
                self._free.extend(buffers)
            else:
                self._retired.append((marker, buffers))
            drop = [self._free.popleft() for _ in range(len(self._free) - self.KEEP)]
        del drop  # released here, outside the lock (each release waits for the device)

    def take(self, nbytes: int) -> cl.Buffer | None:
        """A spare buffer of exactly ``nbytes`` bytes the device is done with, or None."""
        complete = cl.command_execution_status.COMPLETE
        with self._lock:
            while self._retired and self._retired[0][0].command_execution_status == complete:
                self._free.extend(self._retired.popleft()[1])
            for k, buf in enumerate(self._free):
                if buf.size == nbytes:
                    del self._free[k]
                    return buf
        return None


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
    top: cl.Buffer | None = None  # the histogram's highest count (long rows only)
    top_host: np.ndarray | None = None  # ... read back here
    steps: cl.Buffer | None = None  # loop passes per pixel (count_steps only)
    planes: list[cl.Buffer] | None = None  # per channel, the shuffled chunk (shuffle only)
    busy: bool = False


@dataclass
class _Launch:
    frame: FramePlan
    tile: Tile
    kernel_event: cl.Event | None  # None: an empty slot, nothing computed
    readbacks: list[cl.Event]
    slot: _Slot
    uploads: tuple[np.ndarray, ...]  # kept alive until the non-blocking uploads are done
    region: Region  # what the kernel computed, at the tile's top-left
    # The uploads' events, kept until the tile is finished: pyopencl's event of a copy
    # from host memory (a NannyEvent) waits for that copy when it is deleted, holding the
    # interpreter lock, and on an in-order queue the copy waits for every kernel before
    # it. Dropped at the end of ``launch``, it froze every thread of the process for a
    # whole kernel (a stop signal waited for minutes on PoCL; tests/test_stop.py).
    events: tuple[cl.Event, ...] = ()


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


@dataclass(frozen=True)
class ProgramChoice:
    """The OpenCL programs a :class:`TileRenderer` of ``plan`` builds, chosen from the
    plan, the device's build options and the launch configuration alone: a new render
    builds its first ones (:func:`build_ahead`) while its references are computed."""

    plan: Plan
    config: LaunchConfig
    options: tuple[str, ...]  # every program's: the device's, the channels', pixel blocks
    interior: bool
    count_steps: bool = False

    @classmethod
    def choose(cls, device: cl.Device, plan: Plan, config: LaunchConfig, interior: bool | None = None,
               count_steps: bool = False) -> ProgramChoice:
        options = programs.device_options(device, config.local_bins) + channel_options(plan)
        if config.pixel_blocks:
            options += ("-DPIXEL_BLOCKS",)
        return cls(plan, config, options, config.interior if interior is None else interior, count_steps)

    def polar(self, frame: FramePlan) -> bool:
        """Whether ``frame`` is an expmap strip segment (polar tiles)."""
        layout = self.plan.layout
        return layout is not None and layout.units[frame.index].kind != CENTRE

    def lanes(self, frame: FramePlan) -> int:
        """Pixels in flight per work-item for this frame (1: one at a time)."""
        if (frame.precision != "perturb" or self.count_steps
                or frame.log10_spacing < precision.PERTURB_FX_BELOW_LOG10):
            return 1
        return max(1, self.config.lanes)

    def kernel(self, frame: FramePlan) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """(key, sources, options) of the program whose ``mandel`` renders ``frame``;
        frames of one key share it."""
        fmt = frame.precision
        sources: tuple[str, ...] = (programs.FORMAT_SOURCES[fmt], "histogram.cl", "mandel.cl")
        extra: tuple[str, ...] = ()
        if fmt == "perturb" and frame.log10_spacing < precision.PERTURB_FX_BELOW_LOG10:
            extra = ("-DPERTURB_FX",)
        if self.polar(frame):
            extra += ("-DPOLAR",)
        if frame.rotated:
            extra += ("-DROTATED",)
        if fmt == "perturb" and self.count_steps:
            extra += ("-DPERTURB_STEPS",)
        if fmt == "perturb" and not self.interior:
            extra += ("-DPERTURB_NO_INTERIOR",)
        if self.lanes(frame) > 1:
            sources = ("perturb.cl", "perturb_lanes.cl", "histogram.cl", "mandel.cl")
            extra += (f"-DPERTURB_LANES={self.lanes(frame)}",)
        if fmt == "perturb" and self.config.min_skip_level != 1:
            extra += (f"-DBLA_MIN_LEVEL={self.config.min_skip_level}",)
        return fmt + "".join(extra), sources, self.options + extra

    def hist_top(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """(sources, options) of the program that finds a tile's highest count, for
        histogram rows longer than HIST_STAGED; None otherwise."""
        return (("hist_top.cl",), self.options) if self.plan.bins > HIST_STAGED else None


def build_ahead(device: cl.Device, info: DeviceInfo, plan: Plan, shuffle: bool) -> list[cl.Program]:
    """Build the programs a new render's :class:`TileRenderer` on ``device`` needs
    before its first kernel (the first frame's kernel, the highest count's, the
    shuffle's), on the context made for it beside the start
    (:func:`farm.compute.clstart.prepare_contexts`), which the renderer then takes: its
    own builds find them (:func:`farm.compute.programs.build` keeps a program while
    something holds it: hold the list returned until the renderer exists). Nothing where
    no such context waits. Called while the references are computed in a process of
    their own (farm/run/early_refs.py), it takes the builds off the way to the first kernel
    (60-90 ms of it; BENCHMARKS.md, sixteenth session)."""
    clstart.wait_contexts()
    handle = clstart.made_for(device)
    if handle is None or not plan.frames:
        return []
    ctx = cl.Context.from_int_ptr(handle, retain=True)
    choice = ProgramChoice.choose(device, plan, LaunchConfig.for_device(info))
    first = choice.kernel(plan.frames[0])
    wanted = [first[1:], choice.hist_top(), (("shuffle.cl",), ()) if shuffle else None]
    return [programs.build(ctx, *w) for w in wanted if w is not None]


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
        self._orbits: dict[tuple[int, bool], list] = {}  # (reference, floatexp) -> orbit args
        self._soff: cl.Buffer | None = None  # perturbed frames' sample offsets (samples > 1)
        if count_steps:
            npix = plan.grid.tile_w * plan.grid.tile_h
            for slot in self._slots:
                slot.steps = cl.Buffer(self.ctx, cl.mem_flags.WRITE_ONLY, 4 * npix)
        r2 = num.escape_r2(plan.spec.iterations.escape_radius)
        self._r2_args = {fmt: np.float64(r2) if fmt == "perturb" else _scalar(fmt, r2)
                         for fmt in {f.precision for f in plan.frames}}
        # per-frame host state (coordinate axes, or a perturbed frame's arguments),
        # built ahead of need; the device buffers of the last few frames
        self._own_prep = prep is None
        self._prep = prep or FramePrep(plan, references, skipping, interior=self.interior,
                                       high_degree=self.config.high_degree,
                                       processes=self.config.prep_processes)
        self._device_args: collections.OrderedDict[int, tuple[list, list, list]] = (
            collections.OrderedDict())
        self._spares = _Spares()  # dropped frames' table buffers, used again
        self._in_flight: dict[int, _Launch] = {}  # launched, not yet finished or collected
        # perturbed frames' device buffers are made as their preparation completes
        # (:meth:`prepare`), on whichever thread completes it
        self._args_lock = threading.Lock()
        self._uploading: dict[int, threading.Event] = {}  # frames whose buffers are being made ahead

    def _new_slot(self) -> _Slot:
        mf, grid = cl.mem_flags, self.plan.grid
        npix, coord = grid.tile_w * grid.tile_h, 16  # the widest coordinate: uint4/float4
        shapes = [(npix * c.depth, np.dtype(c.dtype)) for c in self.plan.channels]
        shapes.append((min(self.plan.bins, HIST_STAGED), np.dtype(self.hist_dtype)))
        pinned, staging = [], []
        flags: Any = cl.map_flags.READ | cl.map_flags.WRITE
        for count, dtype in shapes:
            buf = cl.Buffer(self.ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, count * dtype.itemsize)
            # (on the side queue: a slot made while kernels run is not made behind them)
            mapped: Any = cl.enqueue_map_buffer(self._side_queue, buf, flags, 0, (count,), dtype,
                                                is_blocking=True)
            pinned.append(buf)
            staging.append(mapped[0])
        written = mf.READ_WRITE if self.shuffle else mf.WRITE_ONLY  # the shuffle reads them
        outputs = [cl.Buffer(self.ctx, written, c.nbytes(npix)) for c in self.plan.channels]
        planes = ([cl.Buffer(self.ctx, mf.READ_WRITE, c.nbytes(npix)) for c in self.plan.channels]
                  if self.shuffle else None)
        per_axis = coord * self.plan.samples * (2 if any(f.rotated for f in self.plan.frames) else 1)
        long_rows = self._hist_top is not None
        return _Slot(cl.Buffer(self.ctx, mf.READ_ONLY, per_axis * grid.tile_w),
                     cl.Buffer(self.ctx, mf.READ_ONLY, per_axis * grid.tile_h), outputs,
                     cl.Buffer(self.ctx, mf.READ_WRITE, 8 * self.plan.bins), staging, pinned,
                     top=cl.Buffer(self.ctx, mf.READ_WRITE, 4) if long_rows else None,
                     top_host=np.zeros(1, np.uint32) if long_rows else None, planes=planes)

    # ----------------------------------------------------------------- per-frame state
    def prepare(self, frame: FramePlan) -> concurrent.futures.Future:
        """Start the frame's host-side preparation (once per process, see
        :class:`FramePrep`); the worker calls this for the frames of the tiles it has
        queued, so the host work of a new frame overlaps the kernels of the one before."""
        future = self._prep.prepare(frame)
        if frame.precision == "perturb":
            with self._args_lock:
                ahead = frame.index not in self._uploading and frame.index not in self._device_args
                if ahead:
                    self._uploading[frame.index] = threading.Event()
            if ahead:
                future.add_done_callback(functools.partial(self._upload_ahead, frame))
        return future

    def _upload_ahead(self, frame: FramePlan, future: concurrent.futures.Future) -> None:
        """A prepared perturbed frame's device buffers (:meth:`_frame_args`), made by the
        thread that finished its preparation (a helper's reader, or the preparation
        thread), not by the launching one: the skip table's upload took a quarter of
        the launching thread's time on a 1080p zoom to 1e-10000."""
        try:
            if not future.cancelled() and future.exception() is None:
                self._frame_args(frame, ahead=True)
        except Exception:  # (the launch makes them again, and reports what fails)
            pass
        finally:
            with self._args_lock:
                done = self._uploading.pop(frame.index, None)
            if done is not None:
                done.set()

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

    def _orbit(self, k: int, fx: bool) -> list:
        """Reference k's orbit arguments (kernels/perturb.cl: orbit, orbit_e, orbit_len,
        wrap_to, wrap_m, wrap_e), its buffers uploaded on first use: doubles, or for
        floatexp frames mantissas and exponents (farm/numerics/orbit.py)."""
        with self._args_lock:
            made = self._orbits.get((k, fx))
        if made is not None:
            return made
        if self.references is None:
            raise RuntimeError("a perturbed frame needs its reference orbit")
        dev = frame_orbit(self.plan, self.references, k)
        mf = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        values = dev.points.mant if fx else dev.points.values
        exps = dev.points.exps if fx else np.zeros(1, np.int32)
        made = [cl.Buffer(self.ctx, mf, hostbuf=np.ascontiguousarray(values, dtype=np.float64)),
                cl.Buffer(self.ctx, mf, hostbuf=np.ascontiguousarray(exps, dtype=np.int32)),
                np.uint32(len(dev.points)), np.uint32(dev.wrap),
                np.array(dev.delta[:2], dtype=np.float64).view(clt.double2)[0], np.int32(dev.delta[2])]
        with self._args_lock:  # (made twice at worst, by two threads: the first kept)
            return self._orbits.setdefault((k, fx), made)

    def _buffer(self, nbytes: int) -> cl.Buffer:
        """A read-only device buffer of ``nbytes`` for a frame's table: a spare one, or new."""
        return self._spares.take(nbytes) or cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY, nbytes)

    def _upload(self, host: np.ndarray) -> cl.Buffer:
        """A read-only device buffer holding ``host``, copied before this returns."""
        buf = self._buffer(max(host.nbytes, 1))
        if host.nbytes:
            cl.enqueue_copy(self._side_queue, buf, host, is_blocking=True)
        return buf

    def _upload_rows(self, host: np.ndarray, columns: int) -> cl.Buffer:
        """A read-only device buffer of ``len(host)`` rows of ``columns`` doubles: the
        rows of ``host`` (k <= columns of them, the preparation leaves out columns that
        are all zero), the rest zero; written as a rectangle by the device, so the
        host neither widens nor pads them (23 MB a frame of the zoom to 1e-10000)."""
        n, k = host.shape
        if k == columns or n == 0:
            return self._upload(host)
        q = self._side_queue
        buf = self._buffer(n * columns * 8)
        cl.enqueue_fill_buffer(q, buf, np.zeros(1, np.float64), 0, n * columns * 8)
        if k:
            cl.enqueue_copy(q, buf, host, buffer_origin=(0, 0, 0), host_origin=(0, 0, 0),  # type: ignore[call-overload]
                            region=(k * 8, n, 1), buffer_pitches=(columns * 8, n * columns * 8),
                            host_pitches=(k * 8, n * k * 8), is_blocking=True)
        else:
            q.finish()
        return buf

    def _frame_args(self, frame: FramePlan, ahead: bool = False) -> tuple[list, list, list]:
        """The per-frame kernel arguments of a perturbed frame, in three parts around
        the tile's position (kernels/perturb.cl): (the orbit and its wrap: _orbit),
        (reference offset, half pixel spacing as mantissa and exponent: the flat
        tile's), then the escape
        radius squared, the skip table (maps and radii buffers in the kernels' layout,
        rows, levels, pre-check shift; no levels when skipping is off) and lambda' of a
        nucleus reference. The device buffers are made once per renderer and frame."""
        with self._args_lock:
            args = self._device_args.get(frame.index)
            making = None if ahead else self._uploading.get(frame.index)
        if args is None and making is not None:  # being made ahead: wait for it
            with self.counters.timing("prep"):
                making.wait()
            with self._args_lock:
                args = self._device_args.get(frame.index)
        if args is None:
            pf: PerturbedFrame = self._host_state(frame)
            t = pf.table
            assert self.references is not None
            head = self._orbit(pf.ref, frame.log10_spacing < precision.PERTURB_FX_BELOW_LOG10)
            flat = [np.array(pf.ref_off, dtype=np.float64).view(clt.double2)[0],
                    np.float64(pf.h_m), np.int32(pf.h_e), *self._sample_offsets(),
                    *self._rotation_args(frame)]
            coef, radius = pf.layout if pf.layout is not None else device_layout(t)
            tail = [self._r2_args["perturb"],
                    self._upload_rows(np.ascontiguousarray(coef, dtype=np.float64), COLUMNS),
                    self._upload(np.ascontiguousarray(radius, dtype=np.float64)),
                    np.uint32(len(radius)), np.uint32(t.levels), np.uint32(t.shift),
                    np.array([pf.lam[0].real, pf.lam[0].imag]).view(clt.double2)[0],
                    np.int32(pf.lam[1])]
            with self._args_lock:  # (made twice at worst, by two threads: the first kept)
                args = self._device_args.setdefault(frame.index, (head, flat, tail))
            if args[2] is not tail:  # never read by a kernel
                self._spares.retire(tail[1:3], None)
        return args

    def _drop_frames(self) -> None:
        """Keep the device arguments of the ``FramePrep.KEEP`` frames made last; the
        others' table buffers become spares once the kernels queued so far are done.
        On the launching thread, after a launch: no kernel that reads them is queued
        after the marker."""
        with self._args_lock:
            dropped = [self._device_args.popitem(last=False)[1][2]
                       for _ in range(len(self._device_args) - FramePrep.KEEP)]
        if dropped:
            self._spares.retire([b for tail in dropped for b in tail[1:3]], cl.enqueue_marker(self.queue))

    def _sample_offsets(self) -> list:
        """A flat perturbed tile's sample offsets (samples > 1: one int2 buffer, sample k's
        offset from the pixel centre in 2^-16 px, x right, y down; none for one sample)."""
        if self.plan.samples == 1:
            return []
        if self._soff is None:
            offs = np.array(sample_pattern.offsets(self.plan.samples), dtype=np.int32)
            self._soff = cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                   hostbuf=np.ascontiguousarray(offs))
        return [self._soff]

    @staticmethod
    def _rotation_args(frame: FramePlan) -> list:
        """A turned frame's (cos, sin) as one double2 (kernels built with -DROTATED), none
        for an unturned frame."""
        if not frame.rotated:
            return []
        return [np.array(num.rotation_doubles(frame.angle), dtype=np.float64).view(clt.double2)[0]]

    # ----------------------------------------------------------------- launches
    def _polar(self, frame: FramePlan) -> bool:
        return self.choice.polar(frame)

    def _lanes(self, frame: FramePlan) -> int:
        return self.choice.lanes(frame)

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

    def _format_args(self, frame: FramePlan, region: Region, slot: _Slot) -> tuple[list, list, tuple]:
        """(leading kernel arguments, upload events, host arrays to keep) of a launch
        that computes ``region`` (a frame's tile, or an expmap unit's region)."""
        if self.plan.layout is not None and region.kind == STRIP:
            return self._polar_args(frame, region, slot)
        size = self.plan.spec.size
        if region.kind == CENTRE:
            size = self.plan.layout.geom.centre_size  # type: ignore[union-attr]
        if frame.precision == "perturb":
            w, h = size
            head, flat, tail = self._frame_args(frame)
            args = [*head, np.int32(2 * region.x0 + 1 - w), np.int32(2 * region.y0 + 1 - h),
                    *flat, *tail, *self._steps_args(slot, region)]
            return args, [], ()
        xs, ys = self.axes(frame)
        n = self.plan.samples * (2 if frame.rotated else 1)  # turned: two terms a sample
        xs_t = np.ascontiguousarray(xs[region.x0 * n:(region.x0 + region.width) * n])
        ys_t = np.ascontiguousarray(ys[region.y0 * n:(region.y0 + region.height) * n])
        uploads = [cl.enqueue_copy(self.queue, slot.xs, xs_t, is_blocking=False),
                   cl.enqueue_copy(self.queue, slot.ys, ys_t, is_blocking=False)]
        args = [slot.xs, slot.ys, self._r2_args[frame.precision]]
        if self.plan.spec.render.distance:  # the pixel spacing: the derivative's unit
            args.append(np.float64(float(frame.spacing)))
        return args + self._rotation_args(frame), uploads, (xs_t, ys_t)

    def _polar_args(self, frame: FramePlan, region: Region, slot: _Slot) -> tuple[list, list, tuple]:
        """A polar tile's arguments (kernels/perturb.cl with -DPOLAR): row radii
        mantissas and their exponent, column (cos, sin), then the unit's r2 and skip
        tables (the frame arguments without the half pixel spacing)."""
        rho_m, rho_e, cis = polar_offsets(self.plan, region)
        uploads = [cl.enqueue_copy(self.queue, slot.ys, rho_m, is_blocking=False),
                   cl.enqueue_copy(self.queue, slot.xs, cis, is_blocking=False)]
        head, _, tail = self._frame_args(frame)
        args = [*head, slot.ys, np.int32(rho_e), slot.xs, *tail, *self._steps_args(slot, region)]
        return args, uploads, (rho_m, cis)

    def _steps_args(self, slot: _Slot, region: Region) -> list:
        """The loop-pass counts' output and row length (count_steps only)."""
        return [slot.steps, np.uint32(region.width)] if self.count_steps else []

    def launch(self, frame: FramePlan, tile: Tile) -> _Launch:
        slot = next((s for s in self._slots if not s.busy), None)
        if slot is None:
            raise RuntimeError(f"more than {len(self._slots)} launches in flight")
        slot.busy = True
        try:
            region = self.region(frame, tile)
            q = self.queue
            if region.kind == EMPTY:  # filler only: nothing to compute
                return _Launch(frame, tile, None, [cl.enqueue_marker(q)], slot, (), region)
            npix = region.pixels
            hist_bytes = frame.bins * np.dtype(self.hist_dtype).itemsize
            args, uploads, keep = self._format_args(frame, region, slot)
            uploads.append(cl.enqueue_fill_buffer(q, slot.hist, np.zeros(1, self.hist_dtype), 0, hist_bytes))

            work = -(-npix * self.plan.samples // self._lanes(frame))  # work-items needed
            global_size = self.config.global_size(work, self.info.compute_units)
            kev = self._kernel(frame)(q, (global_size,), (self.config.local_size,), *args,
                                      np.uint32(region.width),
                                      np.uint32(npix), np.uint32(frame.max_iter),
                                      *slot.outputs, slot.hist, wait_for=uploads)
            if self.shuffle:
                readbacks = self._shuffled_readbacks(slot, region)
            else:
                readbacks = [cl.enqueue_copy(q, stage[:npix * c.depth], buf, is_blocking=False)
                             for c, stage, buf in zip(self.plan.channels, slot.staging, slot.outputs,
                                                      strict=False)]
            readbacks.append(cl.enqueue_copy(q, self._staged_hist(slot, frame), slot.hist,
                                             is_blocking=False))
            if frame.bins > HIST_STAGED:
                readbacks.append(self._find_top(slot, frame.bins))
            q.flush()
            launched = _Launch(frame, tile, kev, readbacks, slot, keep, region, tuple(uploads))
            self._in_flight[id(launched)] = launched
            self._drop_frames()
            return launched
        except BaseException:  # nothing was launched: the slot is free again
            slot.busy = False
            raise

    def _find_top(self, slot: _Slot, bins: int) -> cl.Event:
        """Enqueue kernels/hist_top.cl on the slot's histogram (behind the tile's kernel)
        and the read-back of its result into ``slot.top_host``."""
        assert self._hist_top is not None and slot.top is not None and slot.top_host is not None
        q = self.queue
        cl.enqueue_fill_buffer(q, slot.top, np.zeros(1, np.uint32), 0, 4)
        items = min(-(-bins // 256) * 256, 256 * 256 * max(1, self.info.compute_units))
        self._hist_top(q, (items,), (256,), slot.hist, np.uint32(bins), slot.top)
        return cl.enqueue_copy(q, slot.top_host, slot.top, is_blocking=False)

    def _read_hist(self, slot: _Slot, a: int, b: int) -> np.ndarray:
        """Bins a .. b-1 of the slot's histogram (its kernel finished), read on the side
        queue: called from packing threads while the slot is still busy."""
        out = np.empty(b - a, self.hist_dtype)
        cl.enqueue_copy(self._side_queue, out, slot.hist, src_offset=a * out.itemsize, is_blocking=True)
        return out

    @staticmethod
    def _staged_hist(slot: _Slot, frame: FramePlan) -> np.ndarray:
        """The part of the slot's pinned staging that a tile of ``frame`` reads its
        histogram back into: its first HIST_STAGED bins at most."""
        return slot.staging[-1][:min(frame.bins, HIST_STAGED)]

    def _tile_top(self, launch: _Launch) -> tuple[int | None, Callable[[int, int], np.ndarray] | None]:
        """(top, rest) for :func:`tile_histogram`: (None, None) for rows read back whole."""
        slot = launch.slot
        if launch.kernel_event is None or launch.frame.bins <= HIST_STAGED or slot.top_host is None:
            return None, None
        return int(slot.top_host[0]), functools.partial(self._read_hist, slot)

    def _shuffled_readbacks(self, slot: _Slot, region: Region) -> list[cl.Event]:
        """Shuffle each channel's chunk on the device (kernels/shuffle.cl, behind the tile's
        kernel in the queue) and read the byte planes back into the slot's staging."""
        assert self._shuffler is not None and slot.planes is not None
        grid, q = self.plan.grid, self.queue
        out = []
        for c, buf, planes, stage in zip(self.plan.channels, slot.outputs, slot.planes, slot.staging,
                                         strict=False):
            n = grid.tile_w * grid.tile_h * c.depth
            size = np.dtype(c.dtype).itemsize
            self._shuffler(q, (-(-n // 256) * 256,), (256,), buf, planes, np.uint32(size),
                           np.uint32(c.depth), np.uint32(region.width), np.uint32(region.height),
                           np.uint32(grid.tile_w), np.uint32(grid.tile_h))
            out.append(cl.enqueue_copy(q, stage.view(np.uint8)[:n * size], planes, is_blocking=False))
        return out

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

    @staticmethod
    def done(launch: _Launch) -> bool:
        complete = cl.command_execution_status.COMPLETE
        return all(e.command_execution_status == complete for e in launch.readbacks)

    def finish(self, launch: _Launch) -> TileResult:
        """Wait for the readbacks, copy the tile out of the staging arrays, free the slot.

        A region smaller than the tile is placed at its top-left and the rest filled
        with zeros, which the tile's histogram counts as count 0. (Not for a shuffling
        renderer: its staging holds byte planes.)"""
        if self.shuffle:
            raise RuntimeError("finish() reads the channels as they are: make the renderer without shuffle")
        slot, tile, region = launch.slot, launch.tile, launch.region
        npix = region.pixels
        try:
            wait_quietly(launch.readbacks)
        except BaseException:
            slot.busy = False
            raise
        self._in_flight.pop(id(launch), None)
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
                          seconds, self.counters.values())

    def collect(self, launch: _Launch) -> Collected:
        """A completed launch's results in place (:class:`Collected`); the slot stays
        busy until the caller releases it."""
        try:
            cl.wait_for_events(launch.readbacks)  # complete already: the worker polled
        except BaseException:
            launch.slot.busy = False
            raise
        self._in_flight.pop(id(launch), None)
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

    def render(self, frame: FramePlan, tile: Tile) -> TileResult:
        return self.finish(self.launch(frame, tile))

    def close(self) -> None:
        """Stop the frame preparation this renderer started (a helper process on GPUs).

        Launches still on the device (a stop abandoned them) are handed, with this
        renderer's context, to a thread that waits for them without holding the
        interpreter lock (:func:`_abandon`): freeing them here would wait for their
        kernels, which may run for minutes, with the lock held."""
        if self._in_flight:
            _abandon(self, list(self._in_flight.values()))
            self._in_flight.clear()
        if self._own_prep:
            self._prep.close()


def polar_offsets(plan: Plan, region: Region) -> tuple[np.ndarray, int, np.ndarray]:
    """A polar tile's pixel offsets from the zoom centre (kernels/perturb.cl, -DPOLAR):
    pixel (col, row) of ``region`` is strip sample (g, i) = (y0 + row, x0 + col) at
    ``dc = s_min 2**L_g (cos theta_i + i sin theta_i)`` (farm/plan/expmap.py) =
    ``rho_m[row] 2**rho_e (cis[col, 0] + i cis[col, 1])``.

    Returns ``rho_m`` float64 (height,) in [0.5, 4), ``rho_e`` the shared exponent
    (any size: below 2**-1022 the kernel forms dc in floatexp), ``cis`` float64
    (width, 2). L_g is computed with the geometry's own expression (so the samples sit
    where the synthesis reads them); s_min's mantissa is rounded once to a double."""
    assert plan.layout is not None
    geom = plan.layout.geom
    m, e = num.frexp(plan.s_min)
    g = np.arange(region.y0, region.y0 + region.height, dtype=np.float64)
    big_l = geom.l_base + (g + 0.5) / geom.rows_per_octave
    whole = math.floor(big_l[0])
    rho_m = np.ascontiguousarray(m * np.exp2(big_l - whole))
    theta = TWO_PI * (np.arange(region.x0, region.x0 + region.width, dtype=np.float64) + 0.5) / geom.angles
    cis = np.ascontiguousarray(np.stack([np.cos(theta), np.sin(theta)], axis=1))
    return rho_m, e + whole, cis


_abandoned: queue.SimpleQueue = queue.SimpleQueue()
_waiting = [0]  # abandoned batches whose commands may still run
_waiting_lock = threading.Lock()


def _reap() -> None:
    """Keeps abandoned launches (and their renderer) alive until their commands are
    complete, waiting in clWaitForEvents with the interpreter lock released, then lets
    them go. A daemon thread: a process that ends while it waits ends without the
    drivers' teardown (:func:`kernels_abandoned`, farm/cli.py)."""
    while True:
        owner, launches = _abandoned.get()
        events = [e for launch in launches for e in (*launch.events, *launch.readbacks)]
        with contextlib.suppress(Exception):  # a device error: the objects can go all the same
            cl.wait_for_events(events)
        del owner, launches, events
        with _waiting_lock:
            _waiting[0] -= 1


def kernels_abandoned() -> bool:
    """Whether commands a stop abandoned may still run on a device: the process must then
    end with os._exit, since an OpenCL driver's teardown at exit would wait for them (or,
    PoCL, abort the process)."""
    return _waiting[0] > 0


@functools.cache
def _reaper() -> threading.Thread:
    thread = threading.Thread(target=_reap, name="farm-reaper", daemon=True)
    thread.start()
    return thread


def _abandon(owner: TileRenderer, launches: list[_Launch]) -> None:
    _reaper()
    with _waiting_lock:
        _waiting[0] += 1
    _abandoned.put((owner, launches))


def wait_any(launch: _Launch, poll: float = 0.0002, deadline: float | None = None) -> bool:
    """Sleep-poll until ``launch`` completes or ``deadline`` (time.monotonic) passes."""
    while not TileRenderer.done(launch):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True
