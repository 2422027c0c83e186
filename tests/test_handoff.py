"""Orbits of unknown length handed from the host to an OpenCL device
(farm/numerics/handoff.py): the scan, a preperiod's search and z at past steps give the
same answers on the device as on the host (MPFR). The device here is PoCL's CPU device
(FARM_ORBIT_ENGINE=gpu takes any OpenCL device), so the orbits are short and shallow;
the batch sizes are shrunk so that they cross several batches."""

from __future__ import annotations

import contextlib
import math

import gmpy2
import numpy as np
import pytest
from gmpy2 import mpc, mpfr

from farm.numerics import gpu_orbit, handoff
from farm.numerics import period as per
from farm.numerics.orbiters import orbiter
from farm.numerics.scan import scan

pytestmark = pytest.mark.skipif(not gpu_orbit.devices(gpus_only=False), reason="no OpenCL device")

# a Misiurewicz point of preperiod 177, period 1 (farm find -1.7687 0.0017 --misiurewicz
# --depth 1e-25), whose orbit first shadows the cycle of the one of preperiod 126 nearby
MISI = ("-1.76869679074560518017859914435463056901754636527595626787",
        "0.00172823629645281309494452004972472814841149401864922044409")
# the Seahorse Valley point of issue 11's light job: M(24, 1)
LIGHT = ("-0.775683768009053797469483503934741045728246504615800394794952001400666",
         "0.1364673682946901247332744096178487651977721115924676964078001954008357")


@contextlib.contextmanager
def beside_the_host(c: mpc, bits: int, steps: int, each=lambda run, n: None):
    """A HandoffOrbiter stepped ``steps`` steps beside the host's orbiter, its point
    equal at every step (``each(run, n)`` asserts more): the orbiter, still open, and
    the host's exact z by step."""
    run, ref = handoff.HandoffOrbiter(c, bits), orbiter(c, bits)
    values = {}
    try:
        for n in range(1, steps + 1):
            run.step()
            ref.step()
            assert run.point() == ref.point(), n
            values[n] = ref.value()
            each(run, n)
        yield run, values
    finally:
        run.close()
        ref.close()


def assert_values_at(run, values: dict, ks, bits: int) -> None:
    for k in ks:
        assert abs(run.value_at(k) - values[k]) <= mpfr(2) ** (12 - bits) * abs(values[k]), k


def bulb(bits: int) -> mpc:
    """A point inside the period-2 bulb, near its edge, with digits to full length: its
    orbit is attracted (on a repelling one, the device's and MPFR's last bits part)."""
    with gmpy2.context(gmpy2.get_context(), precision=bits):
        return mpc(mpfr(-1) + mpfr(2) ** -200, mpfr("0.2499") + mpfr(2) ** -190)


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(handoff, "FIRST_CHUNK", 64)
    monkeypatch.setattr(handoff, "CHUNK", 256)


def engines(monkeypatch, run):
    """run() on the host, then on the device: both results."""
    out = []
    for engine in ("cpu", "gpu"):
        monkeypatch.setenv("FARM_ORBIT_ENGINE", engine)
        out.append(run())
    return out


@pytest.mark.parametrize("center, bits", [(LIGHT, 300), (LIGHT[0][:60], 300)], ids=["exact", "near"])
def test_scan_on_the_device_is_the_hosts(monkeypatch, small_batches, center, bits):
    if isinstance(center, str):
        center = (center, LIGHT[1][:24])
    host, dev = engines(monkeypatch, lambda: scan(center, bits, [-10, -30, -60], 1500, 1500,
                                                  repeats=True, log2_exact=40 - bits))
    assert host.periods == dev.periods and host.repeat == dev.repeat == (24, 1)
    assert host.log2_newton == dev.log2_newton  # z_m, z_m+q replayed on the device
    assert np.array_equal(host.orbit.mant, dev.orbit.mant)
    assert np.array_equal(host.orbit.exps, dev.orbit.exps)


def test_handoff_in_mid_orbit(monkeypatch, small_batches):
    """Handed over at step 100: the points and z at past steps (host era, batch ends,
    inside batches) as the host's."""
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "gpu")
    monkeypatch.setattr(handoff, "handoff_step", lambda bits: 100)
    bits = 256

    def handed_over_at_100(run, n):
        assert run.on_device == (n >= 100)

    with beside_the_host(bulb(bits), bits, 1200, handed_over_at_100) as (run, values):
        assert_values_at(run, values, (1, 50, 99, 100, 101, 256, 333, 512, 700, 1024, 1200), bits)
        with pytest.raises(ValueError):
            run.value_at(1201)


def test_preperiodic_orbit_on_the_device_is_the_hosts(monkeypatch, small_batches):
    """The preperiod found past a run of steps that shadow another point's cycle, with
    a few full-precision values, not one a step; the same orbit on both engines."""
    bits = 300
    c = per.misiurewicz(per.parse(MISI, bits), 177, 1, bits)
    asked: list[int] = []
    values_at = handoff.HandoffOrbiter.values_at
    monkeypatch.setattr(handoff.HandoffOrbiter, "values_at",
                        lambda self, ks: asked.extend(ks) or values_at(self, ks))
    for q, steps in ((1, 400), (2, 400), (1, 178)):
        asked.clear()
        host, dev = engines(monkeypatch, lambda q=q, steps=steps: per.preperiodic_orbit(c, q, bits, steps))
        assert host[1] == dev[1] == 177
        assert len(host[0]) == len(dev[0]) == 177 + q + 1
        assert np.array_equal(host[0].mant, dev[0].mant)
        assert min(asked) < 177  # the shadowing run was looked at, at its end ...
        # ... and the equal run at its end, then bisected: pairs of values, a few a run
        runs = 2 + math.ceil(math.log2(steps))
        assert len(set(asked)) <= 2 * runs, sorted(set(asked))


def test_without_a_gpu_the_host_steps_and_says_nothing(monkeypatch, capsys):
    """FARM_ORBIT_ENGINE=auto where there is no GPU (PoCL's CPU device is not one): the
    host steps the whole orbit, as it always has, without a warning."""
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "auto")
    monkeypatch.setattr(handoff, "handoff_step", lambda bits: 10)
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: [])
    bits = 256
    with beside_the_host(per.parse(LIGHT, bits), bits, 40) as (run, _):
        assert not run.on_device
    assert capsys.readouterr().err == ""


def test_a_device_that_fails_in_mid_orbit_leaves_it_to_the_host(monkeypatch, small_batches, capsys):
    """FARM_ORBIT_ENGINE=auto: the device fails on its third batch; the host goes on
    from the last point read back, the same points, and says so once."""
    monkeypatch.setenv("FARM_ORBIT_ENGINE", "auto")
    monkeypatch.setattr(handoff, "handoff_step", lambda bits: 100)
    found = gpu_orbit.devices(gpus_only=False)
    monkeypatch.setattr(gpu_orbit, "devices", lambda gpus_only=True: found)
    calls = []
    run_batch = gpu_orbit.DeviceOrbit.run

    def failing(self, steps, *args, **kwargs):
        calls.append(steps)
        if len(calls) == 3:
            raise gpu_orbit.Unavailable("the device orbit on a test device: lost")
        return run_batch(self, steps, *args, **kwargs)

    monkeypatch.setattr(gpu_orbit.DeviceOrbit, "run", failing)
    bits = 256
    with beside_the_host(bulb(bits), bits, 700) as (run, values):
        assert not run.on_device and len(calls) == 3
        assert_values_at(run, values, (150, 300, 699), bits)
    assert capsys.readouterr().err.count("the orbit on the CPU: the device orbit on a test device: lost") == 1
