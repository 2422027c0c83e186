"""Reference orbits on an OpenCL device: z <- z^2 + c at thousands to millions of bits
with the numbers on the device for the whole orbit (issue 45).

z and c are signed fixed point, multiplied by number-theoretic transforms
(farm/numerics/ntt_layout.py: the numbers, the digit size, the guard bits;
kernels/orbit_ntt.cl: the kernels). A step is two forward and two inverse transforms:
with X and Y the transforms of x and y, X X - Y Y and 2 X Y transform back to
x^2 - y^2 and 2xy; then carries, the shift by F bits and c. Five launches a step,
their arguments set once; no host synchronisation inside a batch: each step writes
z rounded to 53 bits (a mantissa and an exponent per part, tiny values included)
into a device array, which the host reads every BATCH steps, one batch behind the
device, and turns into farm/numerics/orbit.py's points (as ThreadedOrbiter's pair()
does). The host checks the escape radius; the device stops on its own once |Re z| or
|Im z| reaches ntt_layout.FREEZE (the fixed point's integer digit would overflow at
the next square), and :func:`orbit` goes on from there with gmpy2 for the few steps
an orbit that far out takes to pass a large escape radius (1e300 for farm find).

:class:`DeviceOrbit` is the stepper (exact z back with ``value()``); :func:`orbit`
the batch API, the same Orbit as farm/numerics/orbiters.py's ``orbit()``, which uses
it on a GPU from orbiters.GPU_ORBIT_BITS up. Any OpenCL device works (the tests run
on PoCL's CPU device); compiler messages go to the farm's build.log
(farm/runtime/cache.py), not to the terminal. Failures are :class:`Unavailable`.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import warnings
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import gmpy2
import numpy as np
import pyopencl as cl
from gmpy2 import mpc

from farm.errors import DeviceError
from farm.numerics import ntt_layout as nl
from farm.numerics.orbit import TINY_LOG2, Orbit
from farm.runtime.cache import log_build

BATCH = 1024  # steps between two reads of the points on a GPU
CPU_BATCH = 8  # on other devices (PoCL's CPU device slows down with long queues)
PROGRESS_EVERY = 4096  # orbit()'s progress(n) is called at multiples of this
GPU_ITEMS = 512  # work-items of a transform's work-group at most, on a GPU (one a butterfly)
CPU_ITEMS = 64  # elsewhere (PoCL's CPU device)
KERNELS = ("forward_columns", "rows", "inverse_columns", "normalise", "point")


class Unavailable(DeviceError):
    """The device orbit cannot run here: no device, a precision beyond the transforms,
    or an OpenCL error (the message says which)."""


def devices(gpus_only: bool = True) -> list[cl.Device]:
    """The OpenCL devices, GPUs first (only GPUs when ``gpus_only``); [] without OpenCL."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []
    found: list[cl.Device] = []
    for plat in platforms:
        with contextlib.suppress(cl.Error):
            found += plat.get_devices()
    gpus = [d for d in found if d.type & cl.device_type.GPU]
    return gpus if gpus_only else gpus + [d for d in found if not d.type & cl.device_type.GPU]


@functools.cache
def command_queue(device: cl.Device) -> cl.CommandQueue:
    """The device's queue (one a device, in its own context)."""
    return cl.CommandQueue(cl.Context([device]))


SOURCES = ("orbit_ntt.cl",)  # the orbit's kernels (gpu_newton.py builds more after them)


def _source(name: str) -> str:
    try:
        return resources.files("farm.kernels").joinpath(name).read_text(encoding="utf-8")
    except ModuleNotFoundError:  # a checkout on PYTHONPATH, not installed
        return (Path(__file__).resolve().parents[2] / "kernels" / name).read_text(encoding="utf-8")


_programs: dict[tuple[int, tuple[str, ...], tuple[str, ...]], cl.Program] = {}


def program(queue: cl.CommandQueue, options: tuple[str, ...], files: tuple[str, ...] = SOURCES
            ) -> cl.Program:
    """kernels/' ``files`` (one source, in that order) built with ``options`` (once a
    context); a compiler's messages go to the farm's build.log."""
    key = (queue.context.int_ptr, files, options)
    if key not in _programs:
        text = "\n".join(_source(name) for name in files)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            prg = cl.Program(queue.context, text).build(options=list(options))
        if said:
            _log_build(prg, files, options)
        _programs[key] = prg
    return _programs[key]


def _log_build(prg: cl.Program, files: tuple[str, ...], options: tuple[str, ...]) -> None:
    with contextlib.suppress(cl.Error):
        log_build(f"{' + '.join(files)} {' '.join(options)}",
                  [(d.name.strip(), prg.get_build_info(d, cl.program_build_info.LOG).strip())
                   for d in prg.devices])


class DeviceOrbit:
    """z <- z^2 + c at ``bits`` bits on ``device`` (default: the first GPU, else the
    first OpenCL device), z from 0 unless given. ``run`` steps it and returns the
    points; ``value()`` is z exactly (fixed point, ntt_layout.py). ``steps`` counts the
    steps taken; ``stopped`` says the device froze z (|Re z| or |Im z| >= FREEZE);
    ``escaped`` that ``run`` met the escape radius (then z is no longer known)."""

    def __init__(self, c: mpc, bits: int, z: mpc | None = None, device: cl.Device | None = None):
        try:
            self.layout = lay = nl.layout(bits)
        except nl.TooLong as err:
            raise Unavailable(f"the device orbit: {err}") from None
        start = np.zeros(2 * lay.nd, np.int64) if z is None else nl.complex_digits(z, lay)
        if max(abs(start[lay.nd - 1]), abs(start[-1])) >= nl.FREEZE:
            raise ValueError("z starts outside the device orbit's range")
        if device is None:
            found = devices(gpus_only=False)
            if not found:
                raise Unavailable("no OpenCL device")
            device = found[0]
        self.bits, self.device = bits, device
        self.steps, self.stopped, self.escaped = 0, False, False
        try:
            cdig = nl.complex_digits(c, lay)
        except ValueError:
            raise Unavailable("c lies outside the device orbit's fixed-point range") from None
        try:
            self._setup(device, lay, start, cdig)
        except cl.Error as err:
            raise Unavailable(f"the device orbit on {device.name.strip()}: {err}") from None

    def _setup(self, device: cl.Device, lay: nl.Layout, start: np.ndarray, cdig: np.ndarray) -> None:
        gpu = bool(device.type & cl.device_type.GPU)
        most = min(GPU_ITEMS if gpu else CPU_ITEMS, device.max_work_group_size)
        r_items, c_items = (min(most, 1 << (log - 1)) for log in (lay.r_log, lay.c_log))
        self._queue = queue = command_queue(device)
        prg = program(queue, lay.options() + (f"-DR_ITEMS={r_items}", f"-DC_ITEMS={c_items}"))
        ctx, mf = queue.context, cl.mem_flags
        self._digits = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=start)
        # kernel arguments do not hold their buffers: self does
        self._c = cbuf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=cdig)
        self._mid = mid = cl.Buffer(ctx, mf.READ_WRITE, 16 * lay.length)
        self._tw = tw = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=nl.root_powers(lay.length))
        self._state = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(2, np.int32))
        self._tops = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.full(2, -1, np.int32))
        self.batch = batch = BATCH if gpu else CPU_BATCH
        self._mant = [cl.Buffer(ctx, mf.WRITE_ONLY, 16 * batch) for _ in range(2)]
        self._exps = [cl.Buffer(ctx, mf.WRITE_ONLY, 8 * batch) for _ in range(2)]
        self._host = [(np.empty((batch, 2), np.int64), np.empty((batch, 2), np.int32),
                       np.empty(2, np.int32)) for _ in range(2)]
        k = {name: cl.Kernel(prg, name) for name in KERNELS}
        fits = min(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
                   for kernel in k.values())
        if fits < max(r_items, c_items, 64):
            raise Unavailable(f"the device orbit's kernels take work-groups of {fits} at most "
                              f"on {device.name.strip()}")
        k["forward_columns"].set_args(self._digits, mid, tw, self._state)
        k["rows"].set_args(mid, tw, self._state, np.uint64(nl.inverse(lay.length)))
        k["inverse_columns"].set_args(mid, tw, self._state)
        k["normalise"].set_args(mid, cbuf, self._digits, self._tops, self._state)
        self._point = k["point"]
        digits_global = -(-lay.nd // 64) * 64
        self._launches = [
            (k["forward_columns"], ((1 << lay.c_log) * r_items,), (r_items,)),
            (k["rows"], ((1 << lay.r_log) * c_items,), (c_items,)),
            (k["inverse_columns"], ((1 << lay.c_log) * r_items,), (r_items,)),
            (k["normalise"], (digits_global,), (64,)),
            (self._point, (2,), (2,)),
        ]

    def _enqueue(self, slot: int, n: int) -> cl.Event:
        """n steps whose points go to batch buffer ``slot``, then that buffer's copy to
        the host; the event of the last copy."""
        queue = self._queue
        self._point.set_args(self._digits, self._tops, self._mant[slot], self._exps[slot], self._state,
                             np.int32(self._queued))
        launches = self._launches
        for _ in range(n):
            for kernel, size, group in launches:
                cl.enqueue_nd_range_kernel(queue, kernel, size, group)
        self._queued += n
        mant, exps, state = self._host[slot]
        cl.enqueue_copy(queue, mant[:n], self._mant[slot], is_blocking=False)
        cl.enqueue_copy(queue, exps[:n], self._exps[slot], is_blocking=False)
        return cl.enqueue_copy(queue, state, self._state, is_blocking=False)

    def run(self, steps: int, r2: float = math.inf, progress: Callable[[int], None] | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        """Up to ``steps`` more steps: the points Z(n+1), Z(n+2), ... (n = ``steps``
        before), as (mant (k, 2) float64, exps (k,) int32) in farm/numerics/orbit.py's
        form. Fewer than ``steps`` when the orbit escapes (the points end before the
        first with exps 0 and |Z|^2 > r2; ``escaped``) or the device froze it (they end
        with the frozen z; ``stopped``). ``progress(k)`` at multiples of PROGRESS_EVERY
        points of this run."""
        if self.escaped:
            raise ValueError("the orbit escaped: z is no longer known")
        mant, exps = np.empty((steps, 2)), np.empty(steps, np.int32)
        got, sent, slot = 0, 0, 0
        pending: collections.deque[tuple[int, int, cl.Event]] = collections.deque()
        self._queued = self.steps
        try:
            while got < steps and not self.stopped:
                while sent < steps and len(pending) < 2:
                    n = min(self.batch, steps - sent)
                    pending.append((slot, self._queued, self._enqueue(slot, n)))
                    slot, sent = 1 - slot, sent + n
                before = got
                got += self._take(pending.popleft(), mant[got:], exps[got:], r2)
                if progress:
                    for k in range(before // PROGRESS_EVERY * PROGRESS_EVERY + PROGRESS_EVERY, got + 1,
                                   PROGRESS_EVERY):
                        progress(k)
                if self.escaped:
                    break
            self._queue.finish()
        except cl.Error as err:
            raise Unavailable(f"the device orbit on {self.device.name.strip()}: {err}") from None
        return mant[:got], exps[:got]

    def _take(self, batch: tuple, mant: np.ndarray, exps: np.ndarray, r2: float) -> int:
        """A batch's points into mant, exps; how many; sets escaped and stopped."""
        slot, base, event = batch
        event.wait()
        host_mant, host_exps, state = self._host[slot]
        k = int(state[1]) - base
        m, e = pairs(host_mant[:k], host_exps[:k])
        out = np.flatnonzero((e == 0) & (m[:, 0] * m[:, 0] + m[:, 1] * m[:, 1] > r2))
        if len(out):
            k, self.escaped = int(out[0]), True
        mant[:k], exps[:k] = m[:k], e[:k]
        self.steps += k
        self.stopped = bool(state[0]) and not self.escaped
        return k

    def value(self) -> mpc:
        """z after ``steps`` steps, exactly."""
        if self.escaped:
            raise ValueError("the orbit escaped: z is no longer known")
        host = np.empty(2 * self.layout.nd, np.int64)
        cl.enqueue_copy(self._queue, host, self._digits)
        return nl.complex_value(host, self.layout)

    def close(self) -> None:
        with contextlib.suppress(cl.Error):
            self._queue.finish()


def pairs(mant: np.ndarray, exps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The device's points, (k, 2) signed mantissa integers m (|m| in [2^52, 2^53], or
    0) and (k, 2) exponents e (z's part = m 2^(e - 53)), as farm/numerics/orbit.py's
    pair() makes them from (mantissa, exponent) pairs: (mant (k, 2) float64, exps (k,)
    int32)."""
    m = mant.astype(np.float64) * 2.0**-53  # exact: 53-bit integers, in [0.5, 1]
    absent = np.int64(-(1 << 40))
    top = np.max(np.where(m != 0, exps.astype(np.int64), absent), axis=1)
    plain = (top >= TINY_LOG2) | (top == absent)
    shift = np.where(plain, 0, top)
    values = np.ldexp(m, (exps - shift[:, None]).astype(np.int32))
    return values, shift.astype(np.int32)


def orbit(c: mpc, bits: int, steps: int, r2: float, progress: Callable[[int], None] | None = None,
          device: cl.Device | None = None) -> Orbit:
    """Z(0) = 0 .. Z(L-1) of c at ``bits`` bits (L - 1 = steps, or the last n before
    |Z(n)|^2 > r2), as farm/numerics/orbiters.py's orbit() gives them; on the device,
    and past the device's range (FREEZE) with gmpy2, as GmpyOrbiter steps."""
    run = DeviceOrbit(c, bits, device=device)
    try:
        mant, exps = run.run(steps, r2, progress)
        left = steps - run.steps if run.stopped else 0
        tail = _beyond(run.value(), c, bits, left, r2) if left > 0 else []
    finally:
        run.close()
    if tail:
        mant = np.concatenate([mant, np.array(tail)])
        exps = np.concatenate([exps, np.zeros(len(tail), np.int32)])
    return Orbit(np.concatenate([np.zeros((1, 2)), mant]), np.concatenate([np.zeros(1, np.int32), exps]))


def _beyond(z: mpc, c: mpc, bits: int, steps: int, r2: float) -> list[tuple[float, float]]:
    """Up to ``steps`` points after z (|Re z| or |Im z| >= FREEZE: doubles, no tiny
    ones) before |Z|^2 > r2, as GmpyOrbiter computes them."""
    out = []
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        cr, ci, x, y = +c.real, +c.imag, +z.real, +z.imag
        for _ in range(steps):
            x, y = (x + y) * (x - y) + cr, gmpy2.mul_2exp(x * y, 1) + ci
            zr, zi = float(x), float(y)
            if zr * zr + zi * zi > r2:
                break
            out.append((zr, zi))
    return out

