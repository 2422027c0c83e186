"""Newton's orbit on an OpenCL device: z <- z^2 + c and dz <- 2 z dz + 1 together at
thousands to millions of bits, for farm/numerics/newton.py's nuclei and Misiurewicz
points (issue 45).

z is signed fixed point as in the device orbit (farm/numerics/gpu_orbit.py,
ntt_layout.py: F = bits + 64 guard bits at least); dz, which grows to about 2^bits
near a deep minibrot, is block floating point, D 2^e: D fixed point with its highest
digit kept at one place by whole-digit shifts (relative precision F - B - 1 bits, B
the digit's bits: as z's absolute precision, less one digit), e an integer on the
device (kernels/newton_ntt.cl says how, the +1 included: exact while dz is small,
vanishing below D's last digit when dz is huge). A step is the device orbit's
transforms for four numbers (x, y, Re D, Im D): five launches, no host
synchronisation; the host reads z and dz back only at the steps asked for.

:func:`run` is the batch API: ``run(c, bits, steps, at)`` gives z_k and dz_k exactly
(gmpy2 mpc) at the steps ``at`` and ``steps``, and the step at which z left the
device's range (|Re z| or |Im z| >= ntt_layout.FREEZE: the orbit escapes; Newton fails
there as on the CPU, where z overflows). :func:`values` is the same under
farm/numerics/orbiters.py's rules for orbits (FARM_ORBIT_ENGINE, GPU_ORBIT_BITS): None
where the host should compute (no GPU, or the device failed: said once);
:func:`available` says beforehand whether it will try a device.

Accuracy: z as the device orbit's (errors of 2^-F a step, carried by the orbit); dz's
own rounding is 2^-(F-B-1) relative to the dz of the step before: where |dz| drops by
a large factor in one step (z passes near 0 after dz has grown) dz loses that factor
in relative precision, as the error z carries there (2^-F |dz|) costs it anyway, on
the CPU too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import gmpy2
import numpy as np
import pyopencl as cl
from gmpy2 import mpc

from farm.errors import DeviceError
from farm.numerics import gpu_orbit
from farm.numerics import ntt_layout as nl
from farm.numerics.gpu_orbit import Unavailable
from farm.numerics.orbiters import GPU_ORBIT_BITS, on_the_host, orbit_engine

FILES = gpu_orbit.SOURCES + ("newton_ntt.cl",)
KERNELS = ("newton_forward", "newton_rows", "newton_inverse", "newton_normalise", "newton_state")
STOPPED, COUNT, SHIFT, EXP = range(4)  # kernels/newton_ntt.cl's state
MAX_STEPS = 1 << 28  # e grows by under 6 bits a step (|2z| < 46) and is an int on the device
GPU_BATCH = 1024  # steps the host runs ahead of the device, at most twice, on a GPU
CPU_BATCH = 8  # elsewhere (PoCL's CPU device slows down with long queues)

__all__ = ["Unavailable", "Values", "available", "device", "run", "values"]


@dataclass
class Values:
    """What :func:`run` gives: ``at[k] = (z_k, dz_k)``, exact, for each step asked for
    up to ``escaped``; ``escaped``: the step whose z left the device's range (|Re z|
    or |Im z| >= ntt_layout.FREEZE: the orbit escapes; steps after it are absent), or
    None."""

    at: dict[int, tuple[mpc, mpc]] = field(default_factory=dict)
    escaped: int | None = None

    def __getitem__(self, step: int) -> tuple[mpc, mpc]:
        return self.at[step]


class _Newton:
    """The device's buffers and kernels for one c (close() it)."""

    def __init__(self, c: mpc, bits: int, dev: cl.Device):
        try:
            self.layout = lay = nl.layout(bits)
        except nl.TooLong as err:
            raise Unavailable(f"the device Newton orbit: {err}") from None
        try:
            cdig = nl.complex_digits(c, lay)
        except ValueError:
            raise Unavailable("c lies outside the device orbit's fixed-point range") from None
        self.device = dev
        try:
            self._setup(dev, lay, cdig)
        except cl.Error as err:
            raise Unavailable(f"the device Newton orbit on {dev.name.strip()}: {err}") from None

    def _setup(self, dev: cl.Device, lay: nl.Layout, cdig: np.ndarray) -> None:
        gpu = bool(dev.type & cl.device_type.GPU)
        most = min(gpu_orbit.GPU_ITEMS if gpu else gpu_orbit.CPU_ITEMS, dev.max_work_group_size)
        r_items, c_items = (min(most, 1 << (log - 1)) for log in (lay.r_log, lay.c_log))
        self.queue = queue = gpu_orbit.command_queue(dev)
        prg = gpu_orbit.program(queue, lay.options() + (f"-DR_ITEMS={r_items}", f"-DC_ITEMS={c_items}"),
                                FILES)
        ctx, mf = queue.context, cl.mem_flags
        zero = np.zeros(2 * lay.nd, np.int64)
        self.digits = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=zero)
        self.ddig = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=zero)
        # kernel arguments do not hold their buffers: self does
        self._c = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=cdig)
        self._mid = mid = cl.Buffer(ctx, mf.READ_WRITE, 32 * lay.length)
        self._tw = tw = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=nl.root_powers(lay.length))
        self.state = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.zeros(5, np.int32))
        self._tops = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=np.full(1, -1, np.int32))
        self.batch = GPU_BATCH if gpu else CPU_BATCH
        k = {name: cl.Kernel(prg, name) for name in KERNELS}
        fits = min(kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, dev)
                   for kernel in k.values())
        local = min(kernel.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, dev)
                    for kernel in k.values())
        if fits < max(r_items, c_items, 64) or local > dev.local_mem_size:
            raise Unavailable(f"the device Newton orbit's kernels do not fit {dev.name.strip()}")
        k["newton_forward"].set_args(self.digits, self.ddig, mid, tw, self.state)
        k["newton_rows"].set_args(mid, tw, self.state, np.uint64(nl.inverse(lay.length)))
        k["newton_inverse"].set_args(mid, tw, self.state)
        k["newton_normalise"].set_args(mid, self._c, self.digits, self.ddig, self._tops, self.state)
        k["newton_state"].set_args(self.digits, self._tops, self.state)
        self.kernels = k  # they hold their arguments' settings
        self.launches = [
            (k["newton_forward"], ((1 << lay.c_log) * r_items,), (r_items,)),
            (k["newton_rows"], ((1 << lay.r_log) * c_items,), (c_items,)),
            (k["newton_inverse"], ((1 << lay.c_log) * r_items,), (r_items,)),
            (k["newton_normalise"], (-(-lay.nd // 64) * 64,), (64,)),
            (k["newton_state"], (1,), (1,)),
        ]

    def close(self) -> None:
        with contextlib.suppress(cl.Error):
            self.queue.finish()


def run(c: mpc, bits: int, steps: int, at: Iterable[int] = (), device: cl.Device | None = None
        ) -> Values:
    """z_k and dz_k = d z_k / dc (z_0 = dz_0 = 0) of c at ``bits`` bits on ``device``
    (default: the first GPU, else the first OpenCL device), exactly, for k in ``at``
    and k = ``steps``; ``escaped`` where z left the device's range first (the module
    docstring). :class:`Unavailable` when the device cannot run it."""
    wanted = sorted({int(k) for k in at} | {steps})
    if wanted[0] < 0:
        raise ValueError("steps are counted from 0")
    if steps >= MAX_STEPS:
        raise Unavailable(f"the device Newton orbit takes fewer than {MAX_STEPS} steps")
    if device is None:
        found = gpu_orbit.devices(gpus_only=False)
        if not found:
            raise Unavailable("no OpenCL device")
        device = found[0]
    eng = _Newton(c, bits, device)
    try:
        return _values(eng, wanted)
    except cl.Error as err:
        raise Unavailable(f"the device Newton orbit on {device.name.strip()}: {err}") from None
    finally:
        eng.close()


def _values(eng: _Newton, wanted: list[int]) -> Values:
    """Steps the device to wanted[-1], copying z, D and the state back after each
    wanted step (wanted: sorted); the host waits only every eng.batch steps (the batch
    before), and stops sending steps once the device froze z."""
    queue, nd, lay = eng.queue, eng.layout.nd, eng.layout
    snaps: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
    checks = [np.zeros(5, np.int32) for _ in range(2)]
    pending: cl.Event | None = None
    todo = iter(wanted)
    nxt = next(todo)
    for n in range(wanted[-1] + 1):
        if n:
            for kernel, size, group in eng.launches:
                cl.enqueue_nd_range_kernel(queue, kernel, size, group)
        if n == nxt:
            snap = (n, np.empty(2 * nd, np.int64), np.empty(2 * nd, np.int64), np.empty(5, np.int32))
            cl.enqueue_copy(queue, snap[1], eng.digits, is_blocking=False)
            cl.enqueue_copy(queue, snap[2], eng.ddig, is_blocking=False)
            cl.enqueue_copy(queue, snap[3], eng.state, is_blocking=False)
            snaps.append(snap)
            nxt = next(todo, -1)
        if n and n % eng.batch == 0:
            check = checks[n // eng.batch % 2]
            event = cl.enqueue_copy(queue, check, eng.state, is_blocking=False)
            if pending is not None:
                pending.wait()
                if checks[1 - n // eng.batch % 2][STOPPED]:
                    break
            pending = event
    queue.finish()
    out = Values()
    for n, zdig, ddig, state in snaps:
        if state[STOPPED] and out.escaped is None:
            out.escaped = int(state[COUNT])
        if out.escaped is not None and n > out.escaped:
            break
        out.at[n] = (nl.complex_value(zdig, lay), _derivative(ddig, state, lay))
    if out.escaped is None:  # stopped after the last snapshot taken (the loop broke off)
        queue.finish()
        state = np.empty(5, np.int32)
        cl.enqueue_copy(queue, state, eng.state)
        if state[STOPPED]:
            out.escaped = int(state[COUNT])
    return out


def _derivative(ddig: np.ndarray, state: np.ndarray, lay: nl.Layout) -> mpc:
    """dz from a snapshot: D's value 2^(EXP - B SHIFT), exactly."""
    nd, scale = lay.nd, int(state[EXP]) - lay.b * int(state[SHIFT])
    parts = []
    for k in (0, 1):
        v = nl.value_of(ddig[k * nd:(k + 1) * nd], lay)
        with gmpy2.context(gmpy2.get_context(), precision=max(v.bit_length(), 1) + 2):
            parts.append(gmpy2.mul_2exp(gmpy2.mpfr(v), scale - lay.fraction_bits))
    with gmpy2.context(gmpy2.get_context(), precision=max(p.precision for p in parts)):
        return mpc(*parts)


def device(bits: int, steps: int) -> cl.Device | None:
    """The device :func:`values` runs on, as farm/numerics/orbiters.py's orbit() picks
    one: the first GPU from GPU_ORBIT_BITS up (FARM_ORBIT_ENGINE=auto, the default),
    the first OpenCL device at any precision (=gpu), none (=cpu, or no device, or
    ``steps`` past MAX_STEPS)."""
    engine = orbit_engine()
    if engine == "cpu" or steps >= MAX_STEPS or (engine == "auto" and bits < GPU_ORBIT_BITS):
        return None
    found = gpu_orbit.devices(gpus_only=engine == "auto")
    return found[0] if found else None


def available(bits: int, steps: int) -> bool:
    """Whether :func:`values` will try the device for an orbit of ``steps`` steps at
    ``bits`` bits (FARM_ORBIT_ENGINE=gpu: whether there is an OpenCL device)."""
    return device(bits, steps) is not None


def values(c: mpc, bits: int, steps: int, at: Iterable[int] = ()) -> Values | None:
    """:func:`run` on :func:`device`'s choice, or None where the host should step
    instead: no device for these bits, or the device failed (one line on stderr,
    once a reason). With FARM_ORBIT_ENGINE=gpu there is no fall-back: no device, or
    its failure, raises :class:`Unavailable`."""
    forced = orbit_engine() == "gpu"
    try:
        dev = device(bits, steps)
        if dev is None:
            if forced:
                raise Unavailable("no OpenCL device for the Newton orbit")
            return None
        return run(c, bits, steps, at, dev)
    except DeviceError as err:
        if forced:
            raise
        on_the_host("Newton's orbit", err)
        return None
