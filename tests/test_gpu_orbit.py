"""Reference orbits on an OpenCL device (farm/numerics/gpu_orbit.py, ntt_layout.py,
kernels/orbit_ntt.cl) against MPFR's (farm/numerics/orbiters.py on the host): every
stored point within one unit in its last bit of MPFR's and nearly all identical, the
same escape step, tiny points with their exponents, z itself to the guard bits; the
fixed-point digits and the transforms' bounds exactly; and orbit()'s choice of engine
(FARM_ORBIT_ENGINE, the fall-back when there is no device or the device fails).

The device tests run on every OpenCL device (the ``cl_device`` fixture: PoCL's CPU
device here, the GPU too on a GPU machine); PoCL takes 1-3 ms a step at 33k bits, 7-20 ms
at 100k and 20-90 ms at 333k on the 2-core machine (as loaded), so the orbits are
thousands of steps long at 33k bits, hundreds at 100k (thousands: slow) and 300 at 333k
(slow).
"""

from __future__ import annotations

import random

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpc, mpfr

from farm.errors import UsageError
from farm.numerics import gpu_orbit, orbiters
from farm.numerics import ntt_layout as nl
from farm.numerics.orbit import TINY_LOG2, Orbit, pair


def point(re: str, im: str, bits: int) -> mpc:
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        return mpc(mpfr(re), mpfr(im))


def digits(n: int, seed: int) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choice("0123456789") for _ in range(n))


def seahorse_edge(im: str, bits: int) -> mpc:
    """-0.75 + i im with random digits to full length (from 1e-8 on), just outside the
    set: the orbit spirals near the parabolic point for about pi / im steps, then
    escapes."""
    n = bits * 30 // 100
    return point("-0.7500000" + digits(n, 1), im + digits(n, 2), bits)


def cardioid(bits: int) -> mpc:
    """Inside the main cardioid with random digits to full length (benchmarks/depth.py)."""
    tail = digits(bits * 30 // 100, 5)
    return point("-0.1" + tail, "0.1" + tail[::-1], bits)


def host_orbit(c: mpc, bits: int, steps: int, r2: float, monkeypatch) -> Orbit:
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "cpu")
    return orbiters.orbit(c, bits, steps, r2)


def compare(got: Orbit, want: Orbit) -> int:
    """Asserts the same length and exponents and every mantissa within one unit in
    its last place of MPFR's; returns how many points are identical."""
    assert len(got) == len(want)
    assert (got.exps == want.exps).all()
    assert (np.abs(got.mant - want.mant) <= np.spacing(np.abs(want.mant))).all()
    return int((got.mant == want.mant).all(axis=1).sum())


# --------------------------------------------------------------- the numbers, no device

def test_layouts_keep_the_coefficients_below_half_the_prime():
    for bits in (100, 20_000, 33_300, 100_000, 333_000, 1_000_000, 1_600_000, 6_000_000):
        lay = nl.layout(bits)
        assert lay.fraction_bits >= bits + nl.GUARD_BITS
        assert nl.coefficient_bound(lay.b, lay.nd) < nl.P // 2
        assert lay.length >= 2 * lay.nd - 1 and lay.r_log - lay.c_log in (0, 1)
    assert nl.layout(1_000_000).b == 24 and nl.layout(1_000_000).length == 1 << 17
    with pytest.raises(nl.TooLong):
        nl.layout(30_000_000)


def test_the_root_of_unity_has_the_transforms_order():
    for length in (16, 1 << 12):
        w = int(nl.root_powers(length)[1])
        assert pow(w, length // 2, nl.P) == nl.P - 1 and pow(w, length, nl.P) == 1


def test_digits_hold_integers_and_reals_exactly():
    lay = nl.layout(1000)
    rnd = random.Random(3)
    top = 1 << (lay.b * lay.nd - 2)
    for v in [0, 1, -1, top - 1, -top + 1] + [rnd.randrange(-top, top) for _ in range(300)]:
        d = nl.digits_of(v, lay)
        assert nl.value_of(d, lay) == v and np.abs(d).max() <= (1 << (lay.b - 1)) + 1
    with pytest.raises(ValueError):
        nl.digits_of(1 << (lay.b * lay.nd), lay)
    z = point("0.3", "-1.7", 900)
    back = nl.complex_value(nl.complex_digits(z, lay), lay)
    assert back == z  # 900-bit numbers are exact in 1000 + 64 fraction bits


def test_device_points_become_orbit_points_as_pair_makes_them():
    rnd = random.Random(4)
    mant, exps = [], []
    for _ in range(2000):
        e = rnd.choice([0, 1, -3, -959, -960, -961, -1100, -5000, -100_000])
        row = []
        for _part in range(2):
            m = rnd.choice([0, rnd.randrange(1 << 52, (1 << 53) + 1)]) * rnd.choice([1, -1])
            row.append((m, e + rnd.choice([0, 0, -1, -60, -200])))
        mant.append([row[0][0], row[1][0]])
        exps.append([row[0][1], row[1][1]])
    m, e = gpu_orbit.pairs(np.array(mant, np.int64), np.array(exps, np.int32))
    for k in range(len(mant)):
        want = pair(mant[k][0] / 2.0**53, exps[k][0], mant[k][1] / 2.0**53, exps[k][1])
        assert (m[k, 0], m[k, 1], int(e[k])) == want


# --------------------------------------------------------------- the device against MPFR

@pytest.mark.parametrize("bits, im, steps", [
    (33_300, "0.001", 4000), (100_000, "0.01", 400),
    pytest.param(100_000, "0.002", 2000, marks=pytest.mark.slow)])
def test_orbits_near_the_set_agree_with_mpfr_and_escape_at_the_same_step(cl_device, monkeypatch,
                                                                         bits, im, steps):
    """Hundreds to thousands of steps spiralling near -0.75 before the escape (about
    pi / im)."""
    c = seahorse_edge(im, bits)
    want = host_orbit(c, bits, steps, 4.0, monkeypatch)
    got = gpu_orbit.orbit(c, bits, steps, 4.0, device=cl_device[1])
    assert steps // 2 < len(want) < steps  # it escaped, after a long orbit
    same = compare(got, want)
    assert same >= len(want) - len(want) // 1000, f"{same} of {len(want)} identical"


@pytest.mark.slow
def test_an_orbit_at_333k_bits_agrees_with_mpfr(cl_device, monkeypatch):
    bits, steps = 333_000, 300
    c = cardioid(bits)
    want = host_orbit(c, bits, steps, 4.0, monkeypatch)
    run = gpu_orbit.DeviceOrbit(c, bits, device=cl_device[1])
    mant, exps = run.run(steps)
    got = Orbit(np.concatenate([np.zeros((1, 2)), mant]), np.concatenate([[0], exps]).astype(np.int32))
    assert compare(got, want) >= len(want) - 1
    assert_close(run.value(), c, bits, steps)


def assert_close(z: mpc, c: mpc, bits: int, steps: int) -> None:
    """z is the orbit's z_steps within 2^-(bits + 32): the guard bits hold (an MPFR
    orbit at bits + 256 bits is the truth)."""
    with gmpy2.context(gmpy2.get_context(), precision=bits + 256):
        w = mpc(0)
        for _ in range(steps):
            w = w * w + c
        assert abs(z - w) < gmpy2.mul_2exp(mpfr(1), -bits - 32)


def test_the_stepper_gives_z_exactly_and_goes_on_from_a_given_z(cl_device):
    bits = 33_300
    c = cardioid(bits)
    run = gpu_orbit.DeviceOrbit(c, bits, device=cl_device[1])
    run.run(150)
    z = run.value()
    assert run.steps == 150 and not run.stopped and not run.escaped
    assert_close(z, c, bits, 150)
    again = gpu_orbit.DeviceOrbit(c, bits, z=z, device=cl_device[1])
    again.run(100)
    assert_close(again.value(), c, bits, 250)


def nucleus(guess: complex, period: int, bits: int) -> mpc:
    """The nucleus of ``period`` near ``guess`` by Newton's method at ``bits`` bits."""
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        c = mpc(guess)
        for _ in range(20):
            z, dz = mpc(0), mpc(0)
            for _ in range(period):
                z, dz = z * z + c, 2 * z * dz + 1
            c -= z / dz
        return c


@pytest.mark.parametrize("guess", [-1.7548776662466927 + 0j, -0.12256116687665361 + 0.74486176661974424j])
def test_tiny_points_near_a_nucleus_keep_their_exponent(cl_device, monkeypatch, guess):
    """2^-1500 off a period-3 nucleus (the real one: Im z = 0 throughout), z comes within
    about 2^-1500 of 0 every third step: those points are mantissas and exponents, as
    MPFR's are."""
    bits = 4000
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        c = nucleus(guess, 3, bits) + gmpy2.mul_2exp(mpc(1, 1 if guess.imag else 0), -1500)
    want = host_orbit(c, bits, 600, 4.0, monkeypatch)
    got = gpu_orbit.orbit(c, bits, 600, 4.0, device=cl_device[1])
    assert compare(got, want) == len(want)
    tiny = np.flatnonzero(want.exps)
    assert len(tiny) > 100 and (want.exps[tiny] < TINY_LOG2 - 400).all()


@pytest.mark.parametrize("r2", [4.0, 1e6, 1e300])
def test_escape_past_the_devices_range_goes_on_on_the_host(cl_device, monkeypatch, r2):
    """The device stops at |Re z| or |Im z| >= 16; beyond, orbit() steps on the host
    to the escape radius (1e300 for farm find) and ends where MPFR's orbit ends."""
    bits = 4000
    c = seahorse_edge("0.01", bits)
    want = host_orbit(c, bits, 1000, r2, monkeypatch)
    got = gpu_orbit.orbit(c, bits, 1000, r2, device=cl_device[1])
    assert 250 < len(want) < 1000 and compare(got, want) == len(want)


def test_progress_is_called_as_on_the_host(cl_device, monkeypatch):
    monkeypatch.setattr(gpu_orbit, "PROGRESS_EVERY", 64)
    seen: list[int] = []
    gpu_orbit.orbit(cardioid(4000), 4000, 200, 4.0, seen.append, device=cl_device[1])
    assert seen == [64, 128, 192]


# --------------------------------------------------------------- the choice of engine

def test_the_host_engines_run_where_the_device_is_forbidden_or_missing(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the device engine ran")

    monkeypatch.setattr(gpu_orbit, "orbit", refuse)
    c, bits = cardioid(25_000), 25_000
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "cpu")
    want = orbiters.orbit(c, bits, 20, 4.0)
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "auto")
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: [])
    assert compare(orbiters.orbit(c, bits, 20, 4.0), want) == 21
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "fast")
    with pytest.raises(UsageError, match="FARM_ORBIT_ENGINE"):
        orbiters.orbit(c, bits, 20, 4.0)


def test_a_failing_device_falls_back_once_said_unless_forced(monkeypatch, capsys):
    def fail(*args, **kwargs):
        raise gpu_orbit.Unavailable("the device orbit on Test GPU: out of resources")

    monkeypatch.setattr(gpu_orbit, "orbit", fail)
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: ["a GPU"])
    monkeypatch.setattr(orbiters, "_said", set())
    monkeypatch.setattr(orbiters, "GPU_ORBIT_MIN_S", 0.0)  # (20 steps: the device however short)
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "auto")
    c, bits = cardioid(25_000), 25_000
    first = orbiters.orbit(c, bits, 20, 4.0)
    second = orbiters.orbit(c, bits, 20, 4.0)
    assert len(first) == len(second) == 21
    err = capsys.readouterr().err
    assert err.count("farm: warning: reference orbit on the CPU: ") == 1 and "out of resources" in err
    assert orbiters.orbit(c, 1000, 20, 4.0) is not None  # below GPU_ORBIT_BITS: not tried
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "gpu")
    with pytest.raises(gpu_orbit.Unavailable):
        orbiters.orbit(c, bits, 20, 4.0)


def test_forced_the_device_engine_computes_the_orbit(cl_device, monkeypatch):
    c, bits = seahorse_edge("0.01", 4000), 4000
    want = host_orbit(c, bits, 400, 4.0, monkeypatch)
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: [cl_device[1]])
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "gpu")
    assert compare(orbiters.orbit(c, bits, 400, 4.0), want) == len(want)


def test_a_short_orbit_stays_on_the_host(monkeypatch):
    """Where the host would take less than GPU_ORBIT_MIN_S (a process's first device orbit
    pays 1-2 s of OpenCL start-up), auto does not try the device; a long one does."""
    tried = []

    def device_orbit(*args, **kwargs):
        tried.append(args[2])
        raise gpu_orbit.Unavailable("not here")

    monkeypatch.setattr(gpu_orbit, "orbit", device_orbit)
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: ["a GPU"])
    monkeypatch.setattr(orbiters, "_said", set())
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "auto")
    bits = 33_000
    assert orbiters.host_seconds(bits, 500) < orbiters.GPU_ORBIT_MIN_S <= orbiters.host_seconds(bits, 50_000)
    c = cardioid(bits)
    assert len(orbiters.orbit(c, bits, 500, 4.0)) == 501 and tried == []
    orbiters.orbit(c, bits, 50_000, 1e-300)  # escapes at once on the host after the device said no
    assert tried == [50_000]
