"""Newton's orbit on an OpenCL device (farm/numerics/gpu_newton.py, kernels/newton_ntt.cl)
against MPFR at bits + 256: z within 2^-(bits+16) absolutely and dz = dz/dc within
2^-(bits+16) relatively at the steps asked for, near a nucleus (dz grows to 2^16 and
more each period) and in the main cardioid (dz about 1); dz past the fixed point's range
(c = -2: dz ~ 4^n, the +1 vanishing below its last digit) and dz = 0; the escape; a
Newton iteration from the device's values equal to MPFR's; the choice of engine
(FARM_ORBIT_ENGINE, GPU_ORBIT_BITS) and the fall-back to the host.

The device tests run on every OpenCL device (``cl_device``: PoCL's CPU device here);
PoCL takes about 4-9 ms a step at 33k bits on the 2-core machine (as loaded), twice the
device orbit's, so the orbits are 600-1100 steps long at 33k bits and 150-200 at 100k (3000 and 1000:
slow).
"""

from __future__ import annotations

import random

import gmpy2
import pytest
from gmpy2 import mpc, mpfr

from farm.errors import UsageError
from farm.numerics import gpu_newton, gpu_orbit, orbiters

# a nucleus of period 180 near the Seahorse's spiral (|dz_180| = 2^15.8), to 62 digits
NUCLEUS_180 = ("-0.74440088662068731658819383945397584372622692175169710311429470",
               "0.14033691691239926351007823114406621925964169797871035625005476")


def digits(n: int, seed: int) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choice("0123456789") for _ in range(n))


def near_nucleus(bits: int) -> mpc:
    """The period-180 nucleus (to 200 bits) moved by about 1e-70, random digits to full
    length: inside its component, z_k near 0 every 180 steps, |dz| up to 2^16."""
    n = bits * 30 // 100
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        shift = mpc(mpfr("1e-70") * mpfr("0." + digits(n, 1)), mpfr("1e-70") * mpfr("0." + digits(n, 2)))
        return mpc(mpfr(NUCLEUS_180[0]), mpfr(NUCLEUS_180[1])) + shift


def cardioid(bits: int) -> mpc:
    """Inside the main cardioid, random digits to full length (dz about 1)."""
    tail = digits(bits * 30 // 100, 5)
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        return mpc(mpfr("-0.1" + tail), mpfr("0.1" + tail[::-1]))


def mpfr_newton(c: mpc, bits: int, steps: int) -> list[tuple[mpc, mpc]]:
    """(z_k, dz_k) for k = 0 .. steps at ``bits`` bits, as newton.py's _GmpyNewton."""
    out = []
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        z = dz = mpc(0)
        out.append((z, dz))
        for _ in range(steps):
            dz = 2 * z * dz + 1
            z = z * z + c
            out.append((z, dz))
    return out


def assert_agree(got: gpu_newton.Values, c: mpc, bits: int, steps: int) -> None:
    """Every (z, dz) in ``got`` against MPFR at bits + 256."""
    want = mpfr_newton(c, bits + 256, steps)
    unit = gmpy2.mul_2exp(mpfr(1), -bits - 16)
    for k, (z, dz) in got.at.items():
        wz, wdz = want[k]
        assert abs(z - wz) <= unit, f"z_{k}"
        assert abs(dz - wdz) <= unit * abs(wdz), f"dz_{k}"


@pytest.mark.parametrize("bits, where, steps", [
    (33_300, "nucleus", 1100), (33_300, "cardioid", 600), (100_000, "nucleus", 200),
    (100_000, "cardioid", 150), pytest.param(33_300, "nucleus", 3000, marks=pytest.mark.slow),
    pytest.param(100_000, "nucleus", 1000, marks=pytest.mark.slow)])
def test_z_and_dz_agree_with_mpfr_at_the_steps_asked_for(cl_device, bits, where, steps):
    c = near_nucleus(bits) if where == "nucleus" else cardioid(bits)
    at = [1, 2, 3, 50, 179, 180, 181, 359, 360, 361, 1000, 1080, 1081, 2700, 2701, steps // 2]
    got = gpu_newton.run(c, bits, steps, [k for k in at if k <= steps], device=cl_device[1])
    assert got.escaped is None and set(got.at) == {k for k in at if k <= steps} | {steps}
    assert_agree(got, c, bits, steps)
    if where == "nucleus" and steps >= 1081:  # dz grows large and falls back every period
        sizes = [float(gmpy2.log2(abs(got[k][1]))) for k in (180, 181, 1080, 1081)]
        assert sizes[0] > 15 and sizes[2] > 15 and abs(sizes[1]) < 2 and abs(sizes[3]) < 2


def test_dz_past_the_fixed_points_range_and_dz_zero(cl_device):
    """c = -2: z = 2 from step 2 on, dz_n = 4 dz_(n-1) + 1, -2^1397.4 at step 700,
    far past the 1080 fraction bits (the +1 falls below D's last digit from about step
    540); c = -1/2: dz_2 = 0 exactly, then 1."""
    bits = 1000
    at = [1, 2, 10, 500, 539, 540, 541, 600]
    got = gpu_newton.run(mpc(-2), bits, 700, at, device=cl_device[1])
    assert_agree(got, mpc(-2), bits, 700)
    assert got[700][0] == 2 and 1397 < gmpy2.log2(abs(got[700][1])) < 1398
    got = gpu_newton.run(mpc(-0.5), bits, 6, [0, 1, 2, 3], device=cl_device[1])
    assert [got[k][1] for k in range(4)] == [0, 1, 0, 1] and got[0][0] == 0
    assert_agree(got, mpc(-0.5), bits, 6)


def test_the_escape_is_reported_at_the_step_z_leaves_the_range(cl_device):
    bits = 1000
    c = mpc(0.5, 0.1)
    want = mpfr_newton(c, bits + 256, 30)
    first = next(k for k, (z, _) in enumerate(want) if max(abs(z.real), abs(z.imag)) >= 16)
    got = gpu_newton.run(c, bits, 100, [3, first, first + 1], device=cl_device[1])
    assert got.escaped == first and set(got.at) == {3, first}
    assert_agree(got, c, bits, first)


def test_a_newton_iteration_from_the_devices_values_is_mpfrs(cl_device):
    """nucleus()'s iteration, c <- c - 1 / (dz_p / z_p - sum over k | p, k < p of
    dz_k / z_k), from the device's values and from MPFR's at the same bits: the same
    c to the precision asked (newton.py's tolerance, 2^(8 - bits) relative)."""
    bits, p = 33_300, 180
    divisors = [k for k in range(1, p) if p % k == 0]
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        guess = near_nucleus(bits) + mpc(1e-40, -1e-40)  # z_p about 2^-117
    got = gpu_newton.run(guess, bits, p, divisors, device=cl_device[1])
    want = mpfr_newton(guess, bits, p)
    steps = []
    for values in ({k: got[k] for k in divisors + [p]}, {k: want[k] for k in divisors + [p]}):
        with gmpy2.context(gmpy2.get_context(), precision=bits):
            lower = sum((values[k][1] / values[k][0] for k in divisors), mpc(0))
            slope = values[p][1] / values[p][0] - lower
            steps.append(guess - 1 / slope)
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        assert abs(steps[0] - steps[1]) <= gmpy2.mul_2exp(abs(steps[1]), 8 - bits)
        assert abs(steps[1] - guess) > mpfr(1e-41)  # the iteration moved c


# --------------------------------------------------------------- the choice of engine

def test_the_host_is_used_where_the_device_is_forbidden_missing_or_too_shallow(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the device engine ran")

    monkeypatch.setattr(gpu_newton, "run", refuse)
    c, deep = cardioid(1000), orbiters.GPU_ORBIT_BITS
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: ["a GPU"])
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "cpu")
    assert not gpu_newton.available(deep, 1000) and gpu_newton.values(c, deep, 1000) is None
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "auto")
    assert gpu_newton.available(deep, 1000) and not gpu_newton.available(deep - 1, 1000)
    assert gpu_newton.values(c, deep - 1, 1000) is None
    assert not gpu_newton.available(deep, gpu_newton.MAX_STEPS)
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: [])
    assert not gpu_newton.available(deep, 1000) and gpu_newton.values(c, deep, 1000) is None
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "gpu")
    with pytest.raises(gpu_newton.Unavailable):
        gpu_newton.values(c, deep, 1000)
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "fast")
    with pytest.raises(UsageError, match="FARM_ORBIT_ENGINE"):
        gpu_newton.available(deep, 1000)


def test_a_failing_device_falls_back_once_said_unless_forced(monkeypatch, capsys):
    def fail(*args, **kwargs):
        raise gpu_newton.Unavailable("the device Newton orbit on Test GPU: out of resources")

    monkeypatch.setattr(gpu_newton, "run", fail)
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: ["a GPU"])
    monkeypatch.setattr(orbiters, "_said", set())
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "auto")
    c, bits = cardioid(1000), orbiters.GPU_ORBIT_BITS
    assert gpu_newton.values(c, bits, 100) is None and gpu_newton.values(c, bits, 100) is None
    err = capsys.readouterr().err
    assert err.count("farm: warning: Newton's orbit on the CPU: ") == 1 and "out of resources" in err
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "gpu")
    with pytest.raises(gpu_newton.Unavailable):
        gpu_newton.values(c, bits, 100)


def test_forced_the_device_engine_computes_the_values(cl_device, monkeypatch):
    c, bits = cardioid(1000), 1000
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: [cl_device[1]])
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "gpu")
    got = gpu_newton.values(c, bits, 40, [7])
    assert got is not None and set(got.at) == {7, 40}
    assert_agree(got, c, bits, 40)


@pytest.mark.parametrize("kind", ["nucleus", "misiurewicz"])
def test_newton_on_the_device_finds_the_host_s_root(monkeypatch, kind):
    """farm/numerics/newton.py takes the device's values (FARM_ORBIT_ENGINE=gpu: PoCL's
    CPU device here) and converges to the root the host's Newton finds, to the bits asked:
    the period-3 nucleus near -1.7549, and the Misiurewicz point c = i (preperiod 2,
    period 2)."""
    from farm.numerics import newton

    if not gpu_orbit.devices(gpus_only=False):
        pytest.skip("no OpenCL device")
    bits = 1200
    calls = []
    real_run = gpu_newton.run
    monkeypatch.setattr(gpu_newton, "run", lambda *a, **k: calls.append(a[2]) or real_run(*a, **k))

    def solve():
        with gmpy2.context(gmpy2.get_context(), precision=bits):
            if kind == "nucleus":
                return newton.nucleus(mpc(mpfr("-1.75"), mpfr("0.001")), 3, bits)
            return newton.misiurewicz(mpc(mpfr("0.02"), mpfr("0.98")), 2, 2, bits)

    monkeypatch.setenv(orbiters.ENGINE_VARIABLE, "cpu")
    host = solve()
    assert host is not None and not calls
    monkeypatch.setenv(orbiters.ENGINE_VARIABLE, "gpu")
    device = solve()
    assert calls and set(calls) == {3 if kind == "nucleus" else 4}  # every orbit on the device
    assert device is not None
    with gmpy2.context(gmpy2.get_context(), precision=bits + 64):
        assert abs(device - host) <= mpfr(2) ** (8 - bits)
