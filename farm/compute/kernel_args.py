"""A tile kernel's leading arguments, before the region's size, the limit and the
outputs (kernels/mandel.cl): what each frame needs on the device, made once per
renderer and frame (:class:`KernelArgs`).

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
once per frame, kept for the last few).

Expmap units (farm/plan/units.py): a strip region is a *polar tile*: perturbation
with each pixel's offset from the zoom centre given per tile as row radii (mantissas
sharing one exponent, so floatexp reaches any depth) and column (cos, sin)
(kernels/perturb.cl built with -DPOLAR; :func:`polar_offsets`); a centre-image region
is a flat tile of the centre image, in its format.
"""

from __future__ import annotations

import collections
import concurrent.futures
import functools
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.cltypes as clt

import farm.numerics as num
from farm.compute.perturbation import PerturbedFrame, frame_orbit
from farm.compute.prep import FramePrep
from farm.compute.slots import Slot
from farm.numerics.bla import COLUMNS, device_layout
from farm.numerics.encode import ENCODERS
from farm.plan import FramePlan, Plan, precision
from farm.plan import samples as sample_pattern
from farm.plan.expmap import TWO_PI
from farm.plan.reference_types import References
from farm.plan.units import CENTRE, STRIP, Region
from farm.runtime.timeline import Counters


class Spares:
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


def _scalar(fmt: str, value: object) -> np.generic:
    """A COORD_T kernel argument from an mpf (a double, or a uint4/float4 vector)."""
    enc = ENCODERS[fmt]([value])
    if fmt == "f64":
        return np.float64(enc[0])
    vector = clt.uint4 if fmt == "fp128" else clt.float4  # (4,) words viewed as one vector
    return np.ascontiguousarray(enc[0]).view(vector)[0]


def rotation_args(frame: FramePlan) -> list:
    """A turned frame's (cos, sin) as one double2 (kernels built with -DROTATED), none
    for an unturned frame."""
    if not frame.rotated:
        return []
    return [np.array(num.rotation_doubles(frame.angle), dtype=np.float64).view(clt.double2)[0]]


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


class KernelArgs:
    """The leading kernel arguments of one renderer's launches (see the module's
    docstring), on its context ``ctx``: a tile's uploads go on ``queue`` (the renderer's,
    in order before its kernel), a frame's buffers are written on ``side_queue``.

    ``host_state(frame)`` gives a frame's prepared host state (farm/compute/prep.py: a
    direct frame's axes, a perturbed frame's :class:`PerturbedFrame`), waiting for it
    where it is not ready. A perturbed frame's device buffers are made once, by the
    thread that finishes its preparation where :meth:`upload_when_prepared` was asked,
    else at its first launch; those of the ``FramePrep.KEEP`` frames made last are kept
    (:attr:`device_args`), the others' table buffers serve later frames
    (:class:`Spares`). Thread-safe."""

    def __init__(self, ctx: cl.Context, queue: cl.CommandQueue, side_queue: cl.CommandQueue, plan: Plan,
                 references: References | None, counters: Counters,
                 host_state: Callable[[FramePlan], Any], count_steps: bool = False):
        self.ctx = ctx
        self.queue = queue
        self.side_queue = side_queue
        self.plan = plan
        self.references = references
        self.counters = counters
        self.count_steps = count_steps
        self._host_state = host_state
        self._orbits: dict[tuple[int, bool], list] = {}  # (reference, floatexp) -> orbit args
        self._soff: cl.Buffer | None = None  # perturbed frames' sample offsets (samples > 1)
        r2 = num.escape_r2(plan.spec.iterations.escape_radius)
        self._r2_args = {fmt: np.float64(r2) if fmt == "perturb" else _scalar(fmt, r2)
                         for fmt in {f.precision for f in plan.frames}}
        self.device_args: collections.OrderedDict[int, tuple[list, list, list]] = (
            collections.OrderedDict())
        self.spares = Spares()  # dropped frames' table buffers, used again
        self._lock = threading.Lock()
        self._uploading: dict[int, threading.Event] = {}  # frames whose buffers are being made ahead

    # ----------------------------------------------------------------- a launch's
    def for_region(self, frame: FramePlan, region: Region, slot: Slot) -> tuple[list, list, tuple]:
        """(leading kernel arguments, upload events, host arrays to keep) of a launch
        that computes ``region`` (a frame's tile, or an expmap unit's region) in ``slot``."""
        if self.plan.layout is not None and region.kind == STRIP:
            return self._polar_args(frame, region, slot)
        size = self.plan.spec.size
        if region.kind == CENTRE:
            size = self.plan.layout.geom.centre_size  # type: ignore[union-attr]
        if frame.precision == "perturb":
            w, h = size
            head, flat, tail = self.perturbed(frame)
            args = [*head, np.int32(2 * region.x0 + 1 - w), np.int32(2 * region.y0 + 1 - h),
                    *flat, *tail, *self._steps_args(slot, region)]
            return args, [], ()
        xs, ys = self._host_state(frame)
        n = self.plan.samples * (2 if frame.rotated else 1)  # turned: two terms a sample
        xs_t = np.ascontiguousarray(xs[region.x0 * n:(region.x0 + region.width) * n])
        ys_t = np.ascontiguousarray(ys[region.y0 * n:(region.y0 + region.height) * n])
        uploads = [cl.enqueue_copy(self.queue, slot.xs, xs_t, is_blocking=False),
                   cl.enqueue_copy(self.queue, slot.ys, ys_t, is_blocking=False)]
        args = [slot.xs, slot.ys, self._r2_args[frame.precision]]
        if self.plan.spec.render.distance:  # the pixel spacing: the derivative's unit
            args.append(np.float64(float(frame.spacing)))
        return args + rotation_args(frame), uploads, (xs_t, ys_t)

    def _polar_args(self, frame: FramePlan, region: Region, slot: Slot) -> tuple[list, list, tuple]:
        """A polar tile's arguments (kernels/perturb.cl with -DPOLAR): row radii
        mantissas and their exponent, column (cos, sin), then the unit's r2 and skip
        tables (the frame arguments without the half pixel spacing)."""
        rho_m, rho_e, cis = polar_offsets(self.plan, region)
        uploads = [cl.enqueue_copy(self.queue, slot.ys, rho_m, is_blocking=False),
                   cl.enqueue_copy(self.queue, slot.xs, cis, is_blocking=False)]
        head, _, tail = self.perturbed(frame)
        args = [*head, slot.ys, np.int32(rho_e), slot.xs, *tail, *self._steps_args(slot, region)]
        return args, uploads, (rho_m, cis)

    def _steps_args(self, slot: Slot, region: Region) -> list:
        """The loop-pass counts' output and row length (count_steps only)."""
        return [slot.steps, np.uint32(region.width)] if self.count_steps else []

    # ----------------------------------------------------------------- a perturbed frame's
    def upload_when_prepared(self, frame: FramePlan, future: concurrent.futures.Future) -> None:
        """Make a perturbed frame's device buffers as soon as ``future`` (its preparation)
        completes, on the thread that completes it; nothing for other frames, or where
        they are made or being made already."""
        if frame.precision != "perturb":
            return
        with self._lock:
            ahead = frame.index not in self._uploading and frame.index not in self.device_args
            if ahead:
                self._uploading[frame.index] = threading.Event()
        if ahead:
            future.add_done_callback(functools.partial(self._upload_ahead, frame))

    def _upload_ahead(self, frame: FramePlan, future: concurrent.futures.Future) -> None:
        """A prepared perturbed frame's device buffers (:meth:`perturbed`), made by the
        thread that finished its preparation (a helper's reader, or the preparation
        thread), not by the launching one: the skip table's upload took a quarter of
        the launching thread's time on a 1080p zoom to 1e-10000."""
        try:
            if not future.cancelled() and future.exception() is None:
                self.perturbed(frame, ahead=True)
        except Exception:  # (the launch makes them again, and reports what fails)
            pass
        finally:
            with self._lock:
                done = self._uploading.pop(frame.index, None)
            if done is not None:
                done.set()

    def perturbed(self, frame: FramePlan, ahead: bool = False) -> tuple[list, list, list]:
        """The per-frame kernel arguments of a perturbed frame, in three parts around
        the tile's position (kernels/perturb.cl): (the orbit and its wrap: _orbit),
        (reference offset, half pixel spacing as mantissa and exponent: the flat
        tile's), then the escape
        radius squared, the skip table (maps and radii buffers in the kernels' layout,
        rows, levels, pre-check shift; no levels when skipping is off) and lambda' of a
        nucleus reference. The device buffers are made once per renderer and frame."""
        with self._lock:
            args = self.device_args.get(frame.index)
            making = None if ahead else self._uploading.get(frame.index)
        if args is None and making is not None:  # being made ahead: wait for it
            with self.counters.timing("prep"):
                making.wait()
            with self._lock:
                args = self.device_args.get(frame.index)
        if args is None:
            pf: PerturbedFrame = self._host_state(frame)
            t = pf.table
            assert self.references is not None
            head = self._orbit(pf.ref, frame.log10_spacing < precision.PERTURB_FX_BELOW_LOG10)
            flat = [np.array(pf.ref_off, dtype=np.float64).view(clt.double2)[0],
                    np.float64(pf.h_m), np.int32(pf.h_e), *self._sample_offsets(),
                    *rotation_args(frame)]
            coef, radius = pf.layout if pf.layout is not None else device_layout(t)
            tail = [self._r2_args["perturb"],
                    self._upload_rows(np.ascontiguousarray(coef, dtype=np.float64), COLUMNS),
                    self._upload(np.ascontiguousarray(radius, dtype=np.float64)),
                    np.uint32(len(radius)), np.uint32(t.levels), np.uint32(t.shift),
                    np.array([pf.lam[0].real, pf.lam[0].imag]).view(clt.double2)[0],
                    np.int32(pf.lam[1])]
            with self._lock:  # (made twice at worst, by two threads: the first kept)
                args = self.device_args.setdefault(frame.index, (head, flat, tail))
            if args[2] is not tail:  # never read by a kernel
                self.spares.retire(tail[1:3], None)
        return args

    def drop_frames(self) -> None:
        """Keep the device arguments of the ``FramePrep.KEEP`` frames made last; the
        others' table buffers become spares once the kernels queued so far are done.
        On the launching thread, after a launch: no kernel that reads them is queued
        after the marker."""
        with self._lock:
            dropped = [self.device_args.popitem(last=False)[1][2]
                       for _ in range(len(self.device_args) - FramePrep.KEEP)]
        if dropped:
            self.spares.retire([b for tail in dropped for b in tail[1:3]], cl.enqueue_marker(self.queue))

    def _orbit(self, k: int, fx: bool) -> list:
        """Reference k's orbit arguments (kernels/perturb.cl: orbit, orbit_e, orbit_len,
        wrap_to, wrap_m, wrap_e), its buffers uploaded on first use: doubles, or for
        floatexp frames mantissas and exponents (farm/numerics/orbit.py)."""
        with self._lock:
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
        with self._lock:  # (made twice at worst, by two threads: the first kept)
            return self._orbits.setdefault((k, fx), made)

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

    # ----------------------------------------------------------------- device buffers
    def _buffer(self, nbytes: int) -> cl.Buffer:
        """A read-only device buffer of ``nbytes`` for a frame's table: a spare one, or new."""
        return self.spares.take(nbytes) or cl.Buffer(self.ctx, cl.mem_flags.READ_ONLY, nbytes)

    def _upload(self, host: np.ndarray) -> cl.Buffer:
        """A read-only device buffer holding ``host``, copied before this returns."""
        buf = self._buffer(max(host.nbytes, 1))
        if host.nbytes:
            cl.enqueue_copy(self.side_queue, buf, host, is_blocking=True)
        return buf

    def _upload_rows(self, host: np.ndarray, columns: int) -> cl.Buffer:
        """A read-only device buffer of ``len(host)`` rows of ``columns`` doubles: the
        rows of ``host`` (k <= columns of them, the preparation leaves out columns that
        are all zero), the rest zero; written as a rectangle by the device, so the
        host neither widens nor pads them (23 MB a frame of the zoom to 1e-10000)."""
        n, k = host.shape
        if k == columns or n == 0:
            return self._upload(host)
        q = self.side_queue
        buf = self._buffer(n * columns * 8)
        cl.enqueue_fill_buffer(q, buf, np.zeros(1, np.float64), 0, n * columns * 8)
        if k:
            cl.enqueue_copy(q, buf, host, buffer_origin=(0, 0, 0), host_origin=(0, 0, 0),  # type: ignore[call-overload]
                            region=(k * 8, n, 1), buffer_pitches=(columns * 8, n * columns * 8),
                            host_pitches=(k * 8, n * k * 8), is_blocking=True)
        else:
            q.finish()
        return buf
