"""An orbit stepper for orbits whose length nobody knows in advance (a scan for the
period, a preperiod's search): it steps on this host, and once the host would have
taken orbiters.GPU_ORBIT_MIN_S it hands the orbit to a GPU (farm/numerics/gpu_orbit.py),
going on from z exactly where the host stopped (issue 45: at 1e-100000 a period scan of
200,000 steps took the host's MPFR 3-6 minutes; the device 10 s).

:class:`HandoffOrbiter` steps as farm/numerics/orbiters.py's orbiters do (``step``,
``point``, ``value``, ``close``) and also gives z exactly at any step already taken
(``value_at``), which is what a scan needs to check a candidate cycle:

* on the host, from points kept every ``interval`` steps (16 at first, at most ``most``
  of them, thinned by halving), replayed on the host;
* on the device, from z read back at the end of every batch of steps (powers of two,
  then every CHUNK steps), replayed on the device: at most CHUNK steps again.

The device steps a batch ahead of the caller. Where it froze z (|Re z| or |Im z| past
ntt_layout.FREEZE: the orbit escapes) the host goes on from there. FARM_ORBIT_ENGINE:
=cpu never hands over, =gpu hands over at once on any OpenCL device (PoCL's too, for
the tests) and a failure there is an error; with auto a failure stays on the host and
says so once (orbiters.on_the_host).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from gmpy2 import mpc

from farm.errors import DeviceError
from farm.numerics import orbiters
from farm.numerics.mpfr_points import log2_abs
from farm.numerics.orbit import Derivative, Orbit, Recorder
from farm.numerics.orbiters import Orbiter, on_the_host, orbit_engine, orbiter, restart

if TYPE_CHECKING:
    from farm.numerics.gpu_orbit import DeviceOrbit

CHUNK = 1 << 14  # the device's batches grow by powers of two up to this many steps
FIRST_CHUNK = 1 << 10


def handoff_step(bits: int) -> float:
    """The step at which the orbit goes to a device: where the host would have worked
    GPU_ORBIT_MIN_S (FARM_ORBIT_ENGINE=auto, from GPU_ORBIT_BITS up), at once (=gpu),
    never (=cpu, or shallower)."""
    engine = orbit_engine()
    if engine == "gpu":
        return 0
    if engine == "cpu" or bits < orbiters.GPU_ORBIT_BITS:
        return math.inf
    return math.ceil(orbiters.GPU_ORBIT_MIN_S / orbiters.host_seconds(bits, 1))


def on_a_device(bits: int) -> bool:
    """Whether a long orbit at ``bits`` bits goes to a device here (FARM_ORBIT_ENGINE
    allows it at these bits, and there is a GPU; with =gpu any OpenCL device)."""
    if handoff_step(bits) == math.inf:
        return False
    try:
        from farm.numerics import gpu_orbit

        return bool(gpu_orbit.devices(gpus_only=orbit_engine() != "gpu"))
    except (ImportError, DeviceError):
        return False


class HandoffOrbiter:
    """z <- z^2 + c at ``bits`` bits from z = 0, on the host and then on a device (see
    the module docstring); ``most``: how many host points ``value_at`` keeps."""

    def __init__(self, c: mpc, bits: int, most: int = 256):
        self.c, self.bits, self.n = c, bits, 0
        self._host = orbiter(c, bits)
        self._handoff = handoff_step(bits)
        self._forced = orbit_engine() == "gpu"
        self._device: Any = None  # the OpenCL device once handed over (False: none)
        self._run: DeviceOrbit | None = None  # its DeviceOrbit, which is ahead of n by the batch in hand
        self._mant = np.empty((0, 2))
        self._exps = np.empty(0, np.int32)
        self._first = 0  # the step of the batch's first point
        self._exact: dict[int, mpc] = {}  # device steps whose z was read back
        self._frozen_at = math.inf  # the step whose z the device froze (the host after it)
        self.interval, self.most = 16, most
        self._saved: dict[int, object] = {0: self._host.save()}
        self._maybe_handoff()

    # stepping

    def step(self) -> None:
        self.n += 1
        if self._run is None:
            self._host.step()
            if self.n % self.interval == 0:
                self._keep()
            self._maybe_handoff()
        elif self.n - self._first >= len(self._mant):
            self._next_batch()

    def point(self) -> tuple[float, float, int]:
        """z as (zr, zi, e): farm/numerics/orbit.py's pair."""
        if self._run is None:
            return self._host.point()
        k = self.n - self._first
        return float(self._mant[k, 0]), float(self._mant[k, 1]), int(self._exps[k])

    def value(self) -> mpc:
        return self.value_at(self.n)

    @property
    def on_device(self) -> bool:
        return self._run is not None

    def _maybe_handoff(self) -> None:
        if self.n < self._handoff or self._device is False:
            return
        try:
            from farm.numerics import gpu_orbit

            found = gpu_orbit.devices(gpus_only=not self._forced)
            if not found:
                if self._forced:
                    raise gpu_orbit.Unavailable("no OpenCL device")
                self._device, self._handoff = False, math.inf  # no GPU: the host's, as ever
                return
            self._device = found[0]
            self._start_device(self._host.value())
        except (ImportError, DeviceError) as err:
            if self._forced:
                raise
            on_the_host("the orbit", err)
            self._device, self._handoff = False, math.inf

    def _start_device(self, z: mpc) -> None:
        from farm.numerics import gpu_orbit

        self._run = gpu_orbit.DeviceOrbit(self.c, self.bits, z if self.n else None, self._device)
        self._exact[self.n] = z
        zr, zi, e = self._host.point() if self.n else (0.0, 0.0, 0)  # z_n, until the next step
        self._host.close()
        self._mant, self._exps, self._first = np.array([[zr, zi]]), np.array([e], np.int32), self.n

    def _next_batch(self) -> None:
        """The device's next batch, ending at a power of two or a multiple of CHUNK; where
        the device froze z, the host goes on from it."""
        run = self._run
        assert run is not None
        at = self.n - 1  # the device's steps so far: z_at is the last point taken
        if run.stopped:  # the host from the frozen z (the orbit is escaping)
            self._exact[at] = run.value()
            self._back_to_host(at)
            return
        end = min(1 << max(at.bit_length(), FIRST_CHUNK.bit_length() - 1), (at // CHUNK + 1) * CHUNK)
        end = max(end, at + 1)
        try:
            self._mant, self._exps = run.run(end - at)
            if not len(self._mant):
                raise DeviceError("the device orbit took no step")
        except DeviceError as err:
            if self._forced:
                raise
            on_the_host("the orbit", err)
            self._back_to_host(at)  # from z_at, read back at the batch's start
            return
        self._first = at + 1
        if not run.stopped:
            self._exact[at + len(self._mant)] = run.value()

    def _back_to_host(self, at: int) -> None:
        """The host from z_at (kept in _exact) on, for good: it takes step n = at + 1."""
        assert self._run is not None
        self._run.close()
        self._run, self._handoff, self._frozen_at = None, math.inf, at
        self._host = orbiter(self.c, self.bits, self._exact[at])
        self._host.step()

    # exact values of steps taken

    def _keep(self) -> None:
        """Keep z_n (host), at most ``most`` such points, thinned by halving."""
        self._saved[self.n] = self._host.save()
        if len(self._saved) > self.most:
            self.interval *= 2
            self._saved = {k: v for k, v in self._saved.items() if k % self.interval == 0}

    def value_at(self, k: int) -> mpc:
        """z_k exactly, for k <= n (see :meth:`values_at`)."""
        return self.values_at([k])[0]

    def values_at(self, ks: list[int]) -> list[mpc]:
        """z_k exactly for each k <= n, in order: from the nearest kept point before the
        first, replayed once through them all where it was computed (the host, or the
        device); the current step's and kept ones as they are."""
        if not all(0 <= k <= self.n for k in ks):
            raise ValueError(f"z_{max(ks)} is not known at step {self.n}")
        got = {k: self._host.value() for k in ks if k == self.n and self._run is None}
        got.update((k, self._exact[k]) for k in ks if k in self._exact)
        todo = sorted(set(ks) - set(got))
        if todo:
            got.update(zip(todo, self._replay(todo), strict=True))
        return [got[k] for k in ks]

    def _replay(self, ks: list[int]) -> list[mpc]:
        """z_k for ascending ks, none of them kept: one replay from the kept point before
        the first."""
        first = ks[0]
        device_from = max((j for j in self._exact if j <= first), default=None)
        if device_from is not None and device_from < self._frozen_at:
            try:
                return self._device_replay(device_from, ks)
            except DeviceError as err:
                if self._forced:
                    raise
                on_the_host("the orbit", err)  # then on the host, from the same point
        start = max(j for j in self._saved if j <= first)
        again: Orbiter
        if device_from is not None and device_from > start:  # a device's point
            start, again = device_from, orbiter(self.c, self.bits, self._exact[device_from])
        else:
            again = restart(self.c, self.bits, self._saved[start])
        out = []
        try:
            for k in ks:
                for _ in range(k - start):
                    again.step()
                start = k
                out.append(again.value())
            return out
        finally:
            again.close()

    def _device_replay(self, start: int, ks: list[int]) -> list[mpc]:
        """z_k for ascending ks by a device orbit from the point read back at ``start``."""
        from farm.numerics import gpu_orbit

        replay = gpu_orbit.DeviceOrbit(self.c, self.bits, self._exact[start], self._device)
        out = []
        try:
            for k in ks:
                replay.run(k - start - replay.steps)
                out.append(replay.value())
            return out
        finally:
            replay.close()

    def close(self) -> None:
        if self._run is not None:
            self._run.close()
        else:
            self._host.close()


NEAR_LOG2 = -40  # rounded points this close (relative) may be equal at full precision


def preperiodic_orbit(c: mpc, period: int, bits: int, steps: int) -> tuple[Orbit, int] | None:
    """(Z(0) .. Z(k + q), k) for a Misiurewicz point c whose cycle has period q =
    ``period``: k is its preperiod, the least k with z_{k+q} = z_k to c's precision
    (|z_{k+q} - z_k| <= 2^(24 - bits) |dz_{k+q}|: a Newton root at ``bits`` bits is
    that close, a point of lower preperiod 2^(-view) |dz| away, 2^70 farther). None
    when the orbit escapes or does not repeat within ``steps``.

    The rounded orbit picks the steps worth a look: runs of steps where z_n lies within
    2^NEAR_LOG2 of z_{n-q}. Full precision decides, since a point near one of lower
    preperiod shadows its cycle for long within a double's resolution; and along a run
    the answer does not change once it is yes (both sides of the test grow with |dz|:
    on the cycle, rounding's error; shadowing, the distance to the other point). So a
    run is asked once, at its last step, and where that is equal, bisected back to its
    first equal step: a few full-precision values (one replay a pair,
    :meth:`HandoffOrbiter.values_at`), not one a step."""
    run, rec, dz = HandoffOrbiter(c, bits), Recorder(), Derivative()
    log2_dz = [-math.inf]
    q = period

    def equal(n: int) -> bool:
        then, now = run.values_at([n - q, n])
        return log2_abs(now - then) <= 24 - bits + log2_dz[n]

    def first_equal(first: int, last: int) -> int | None:
        """The first equal step of the run first .. last, or None."""
        if not equal(last):
            return None
        low, high = first - 1, last  # unequal at low (not near), equal at high
        while high - low > 1:
            mid = (low + high) // 2
            low, high = (low, mid) if equal(mid) else (mid, high)
        return high

    start, found = 0, None  # the run of near steps: its first
    try:
        for n in range(1, steps + 1):
            dz.step(rec.re[n - 1], rec.im[n - 1], rec.ex[n - 1])
            log2_dz.append(dz.log2_abs)
            run.step()
            zr, zi, e = run.point()
            if not e and zr * zr + zi * zi > 4:
                found = first_equal(start, n - 1) if start else None
                break
            rec.add(zr, zi, e)
            near = n >= q and _near(rec, n, n - q)
            if start and not near:  # the run ended at n - 1
                found, start = first_equal(start, n - 1), 0
                if found is not None:
                    break
            elif near and not start:
                start = n
        else:
            found = first_equal(start, steps) if start else None
    finally:
        run.close()
    return None if found is None else (rec.orbit(found + 1), found - q)


def _near(rec: Recorder, n: int, m: int) -> bool:
    """Whether the rounded z_n and z_m lie within 2^NEAR_LOG2 of each other (relative);
    tiny points (an exponent apart) whenever their exponents agree."""
    if rec.ex[n] or rec.ex[m]:
        return rec.ex[n] == rec.ex[m]
    dr, di = rec.re[n] - rec.re[m], rec.im[n] - rec.im[m]
    size = max(rec.re[n] * rec.re[n] + rec.im[n] * rec.im[n], 2.0**-1000)
    return dr * dr + di * di <= 2.0 ** (2 * NEAR_LOG2) * size
