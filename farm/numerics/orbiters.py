"""Orbits at the depth's precision: z <- z^2 + c stepped by the fastest engine for the
precision (one complex number, gmpy2's two products, or two threads), the orbit of a
point rounded as farm/numerics/orbit.py keeps it, and a Misiurewicz point's orbit to
its preperiod and one period.

* Below COMPLEX_BITS one step is one complex operation (ComplexOrbiter: the
  interpreter's cost per operation dominates there); at depth it is two
  multiplications of b-bit numbers (about b^1.6 each; GmpyOrbiter), and from
  mpfr_threads.THREAD_BITS up they run at once on two threads (ThreadedOrbiter).
* An orbiter's ``point()`` is z as a double mantissa pair and an exponent; below
  ``TINY`` (2^TINY_LOG2) the exponent keeps it out of double's underflow.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

import gmpy2
from gmpy2 import mpc, mpfr

from farm.errors import DeviceError, UsageError
from farm.numerics import mpfr_threads
from farm.numerics.mpfr_points import hex_text, precision
from farm.numerics.orbit import TINY_LOG2, Orbit, Recorder, pair


class GmpyOrbiter:
    """z <- z^2 + c at ``bits`` bits with gmpy2 on this thread, one step at a time, as

        x' = (x + y)(x - y) + cr        y' = 2 x y + ci

    (two multiplications a step; x^2 - y^2 and 2 x y took three, 20-25% slower at 30k
    to 100k digits, and cancel where x ~ y). ``z`` starts at 0 unless given."""

    def __init__(self, c: mpc, bits: int, z: mpc | None = None):
        self.bits = bits
        with precision(bits):
            self._cr, self._ci = +c.real, +c.imag
            self._x, self._y = (mpfr(0), mpfr(0)) if z is None else (+z.real, +z.imag)
        self._ctx = gmpy2.context(gmpy2.get_context(), precision=bits)

    def step(self) -> None:
        x, y = self._x, self._y
        with self._ctx:
            self._x = (x + y) * (x - y) + self._cr
            self._y = gmpy2.mul_2exp(x * y, 1) + self._ci

    def point(self) -> tuple[float, float, int]:
        """z as (zr, zi, e): farm/numerics/orbit.py's pair (any depth)."""
        fx, fy = float(self._x), float(self._y)
        if max(abs(fx), abs(fy)) >= TINY:
            return fx, fy, 0
        return _tiny_pair(self._x, self._y)

    def value(self) -> mpc:
        with precision(self.bits):
            return mpc(self._x, self._y)

    def save(self) -> object:
        return self._x, self._y

    def close(self) -> None:
        pass


TINY = 2.0**TINY_LOG2


def _tiny_pair(x: mpfr, y: mpfr) -> tuple[float, float, int]:
    """z = x + i y, too small for doubles as they are, as orbit.py's pair."""
    (ex, mx), (ey, my) = gmpy2.frexp(x), gmpy2.frexp(y)
    return pair(float(mx), ex, float(my), ey)


COMPLEX_BITS = 4096  # below this, orbits step as one complex number (ComplexOrbiter)


class ComplexOrbiter:
    """z <- z * z + c at ``bits`` bits as one gmpy2 complex number (MPC rounds each
    part correctly), for precisions below COMPLEX_BITS: there a step costs the
    interpreter more than the arithmetic, and one complex operation is fewer Python
    operations than GmpyOrbiter's five (1.1-1.7 us a step against 2.7 at 128 bits,
    against 5.0 at 1024, on the 2-core machine; at 8192 bits GmpyOrbiter's two
    products win: 15 us against 19). The rounded points differ from GmpyOrbiter's in
    an orbit point's last bit now and then (3 of 24,206 doubles at 128 bits)."""

    def __init__(self, c: mpc, bits: int, z: mpc | None = None):
        self.bits = bits
        self._ctx = gmpy2.context(gmpy2.get_context(), precision=bits)
        with self._ctx:
            self._c = +c
            self._z = mpc(0) if z is None else +z

    def step(self) -> None:
        with self._ctx:
            self._z = self._z * self._z + self._c

    def point(self) -> tuple[float, float, int]:
        """z as (zr, zi, e): farm/numerics/orbit.py's pair (any depth)."""
        w = complex(self._z)
        if max(abs(w.real), abs(w.imag)) >= TINY:
            return w.real, w.imag, 0
        return _tiny_pair(self._z.real, self._z.imag)

    def value(self) -> mpc:
        return self._z

    def save(self) -> object:
        return self._z

    def close(self) -> None:
        pass


class ThreadedOrbiter:
    """:class:`GmpyOrbiter` on two threads (farm/numerics/mpfr_threads.py); numbers
    cross as exact base-16 texts."""

    def __init__(self, c: mpc, bits: int, z: mpc | None = None):
        self.bits = bits
        start = ("0", "0") if z is None else (hex_text(z.real, bits), hex_text(z.imag, bits))
        self._run = mpfr_threads.Orbiter((hex_text(c.real, bits), hex_text(c.imag, bits)), bits, start, 16)

    def step(self) -> None:
        self._run.step()

    def point(self) -> tuple[float, float, int]:
        return pair(*self._run.parts())

    def value(self) -> mpc:
        x, y = self._run.hex()
        with precision(self.bits):
            return mpc(mpfr(x, self.bits, 16), mpfr(y, self.bits, 16))

    def save(self) -> object:
        return self.value()

    def close(self) -> None:
        self._run.close()


Orbiter = ComplexOrbiter | GmpyOrbiter | ThreadedOrbiter


def orbiter(c: mpc, bits: int, z: mpc | None = None) -> Orbiter:
    """The fastest orbit stepper for ``bits`` here: one complex number below
    COMPLEX_BITS, two threads from mpfr_threads.THREAD_BITS up where MPFR loads and two
    cores are free to run them, else gmpy2's two products (close() it after use)."""
    if bits < COMPLEX_BITS:
        return ComplexOrbiter(c, bits, z)
    if bits >= mpfr_threads.THREAD_BITS and mpfr_threads.available():
        return ThreadedOrbiter(c, bits, z)
    return GmpyOrbiter(c, bits, z)


def restart(c: mpc, bits: int, saved: object) -> Orbiter:
    """An orbiter going on from a point that ``save()`` returned."""
    if isinstance(saved, tuple):
        with precision(bits):
            return orbiter(c, bits, mpc(*saved))
    return orbiter(c, bits, saved)


GPU_ORBIT_BITS = 20_000  # from this precision up, orbit() runs on a GPU where there is one ...
GPU_ORBIT_MIN_S = 2.0  # ... for an orbit the host would take this long at least: a process's
# first device orbit pays 1-2 s of OpenCL start-up (platforms, context, kernels; H200 hosts)


def host_seconds(bits: int, steps: int) -> float:
    """About how long the host's engines take for ``steps`` steps at ``bits`` bits: MPFR
    on two threads of the GPU machines' hosts took 0.10-0.12 ms a step at 33k bits,
    0.27-0.30 at 100k and 1.1-2.2 at 333k (BENCHMARKS.md, "Reference orbits")."""
    return steps * 1.1e-4 * (bits / 33_000) ** 1.2


ENGINE_VARIABLE = "FARM_ORBIT_ENGINE"  # auto | gpu | cpu (docs/reference-cli.md)


def orbit(c: mpc, bits: int, steps: int, r2: float, progress: Callable[[int], None] | None = None
          ) -> Orbit:
    """Z(0) = 0 .. Z(L-1) of c at ``bits`` bits, rounded as farm/numerics/orbit.py keeps
    them: L - 1 = steps, or the last n before |Z(n)|^2 > r2 when c escapes sooner.
    ``progress(n)`` is called every 4096 steps.

    On a GPU from GPU_ORBIT_BITS up when the host would take GPU_ORBIT_MIN_S or more
    (farm/numerics/gpu_orbit.py), else on this host (:func:`orbiter`);
    FARM_ORBIT_ENGINE=gpu takes the device engine at any precision and length and on
    any OpenCL device (PoCL's CPU device too; its failures are errors), =cpu never.
    Where the device engine fails, the host computes the orbit, saying why once."""
    engine = orbit_engine()
    if engine == "gpu" or (engine == "auto" and bits >= GPU_ORBIT_BITS
                           and host_seconds(bits, steps) >= GPU_ORBIT_MIN_S):
        got = _device_orbit(c, bits, steps, r2, progress, forced=engine == "gpu")
        if got is not None:
            return got
    rec = Recorder()
    run = orbiter(c, bits)
    try:
        for n in range(1, steps + 1):
            run.step()
            zr, zi, e = run.point()
            if not e and zr * zr + zi * zi > r2:
                break
            rec.add(zr, zi, e)
            if progress and n % 4096 == 0:
                progress(n)
    finally:
        run.close()
    return rec.orbit()


def orbit_engine() -> str:
    """FARM_ORBIT_ENGINE: auto (the default), gpu or cpu; a UsageError otherwise."""
    engine = os.environ.get(ENGINE_VARIABLE, "auto").strip().lower() or "auto"
    if engine not in ("auto", "gpu", "cpu"):
        raise UsageError(f"{ENGINE_VARIABLE} must be auto, gpu or cpu, not {engine!r}")
    return engine


_said: set[str] = set()


def on_the_host(what: str, err: BaseException) -> None:
    """Say that ``what`` runs on the CPU because the device engine failed: one line on
    stderr, once a reason."""
    line = f"farm: warning: {what} on the CPU: {err}"
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr, flush=True)


def _device_orbit(c: mpc, bits: int, steps: int, r2: float, progress: Callable[[int], None] | None,
                  forced: bool) -> Orbit | None:
    """The orbit by farm/numerics/gpu_orbit.py on the first GPU (on the first OpenCL
    device when ``forced``), or None: no GPU, or a failure (one line on stderr, once a
    reason; raised when ``forced``)."""
    try:
        from farm.numerics import gpu_orbit

        found = gpu_orbit.devices(gpus_only=not forced)
        if not found:
            if forced:
                raise gpu_orbit.Unavailable("no OpenCL device")
            return None
        return gpu_orbit.orbit(c, bits, steps, r2, progress, found[0])
    except (ImportError, DeviceError) as err:
        if forced:
            raise
        on_the_host("reference orbit", err)
        return None
