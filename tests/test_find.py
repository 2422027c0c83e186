"""`farm find`: deep targets (farm/film/find.py) checked against mpmath: nuclei are roots of
z_p of exact period p at the depth, Misiurewicz points repeat from exactly their
preperiod, minibrots are as wide as found; and the command line."""

from __future__ import annotations

import math

import mpmath
import pytest
from conftest import run_farm

from farm.film import find
from farm.spec import parse_text

TIP = ("-1.7687", "0.0017")  # near the tip of the antenna: fast orbits, short periods
LOG2_10 = math.log2(10)


def _orbit(c, steps):
    z, zs = mpmath.mpc(0), []
    for _ in range(steps):
        z = z * z + c
        zs.append(z)
    return zs


def _escapes(c, steps) -> bool:
    z = mpmath.mpc(0)
    for _ in range(steps):
        z = z * z + c
        if abs(z) > 2:
            return True
    return False


def test_minibrot_at_a_chosen_depth():
    """From near the antenna's tip to a minibrot as narrow as a 1e-300 frame: its centre
    is a root of z_p to 1000 bits with no earlier return to 0 (period exactly p), at
    mpmath's own precision; points 1/16 of its width from the nucleus are inside (their
    orbits return near 0 every period), points 4 widths away escape."""
    target = find.find(TIP, math.log2(0.01), -300 * LOG2_10)
    p, width = target.period, target.log2_width
    assert target.kind == "minibrot" and -300 * LOG2_10 - 8 <= width <= -300 * LOG2_10 - 1
    with mpmath.workprec(1200):
        c = mpmath.mpc(*target.center)
        zs = _orbit(c, p)
        dz = mpmath.mpc(0)
        for z in [mpmath.mpc(0), *zs[:-1]]:
            dz = 2 * z * dz + 1
        assert abs(zs[-1] / dz) < mpmath.mpf(2) ** -1000  # a root of z_p
        assert min(abs(z) for z in zs[:-1]) > mpmath.mpf(2) ** -60  # of period p itself
        w = mpmath.mpf(2) ** width
        for u in (1, 1j, -1, -1j):
            near = _orbit(c + u * w / 16, 6 * p)
            assert max(abs(near[k * p - 1]) for k in range(3, 7)) < 0.1  # back near 0 each period
        assert sum(_escapes(c + u * 4 * w, 12 * p) for u in (1, 1j, -1, -1j)) >= 3


def test_misiurewicz_point_at_depth():
    """A Misiurewicz point for a 1e-1000 frame: in mpmath at 3600 bits, Newton's step from
    it to a root of z_{k+q} - z_k is far below a pixel, while z_{k-1+q} and z_{k-1}
    differ: preperiod exactly k."""
    target = find.find(TIP, math.log2(0.01), -1000 * LOG2_10, misi=True)
    k, q = target.preperiod, target.period
    assert target.kind == "misiurewicz" and k >= 2
    with mpmath.workprec(3600):
        c, z, dz, zs, dzs = mpmath.mpc(*target.center), mpmath.mpc(0), mpmath.mpc(0), [], []
        for _ in range(k + q):
            dz = 2 * z * dz + 1
            z = z * z + c
            zs.append(z)
            dzs.append(dz)  # zs[n - 1] = z_n
        step = (zs[k + q - 1] - zs[k - 1]) / (dzs[k + q - 1] - dzs[k - 1])
        assert abs(step) < mpmath.mpf(10) ** -1000 * mpmath.mpf(2) ** -64
        assert abs(zs[k + q - 2] - zs[k - 2]) > 1e-3


def test_chain_of_julia_sets():
    """--chain: each minibrot sits on the embedded Julia set of the one before, at a
    higher period, until one is narrower than the depth; every nucleus is a root of
    its z_p (mpmath)."""
    target = find.find(TIP, math.log2(0.01), -40 * LOG2_10, chained=True)
    periods = [s.period for s in target.stages]
    assert len(periods) >= 3 and periods == sorted(set(periods))
    assert target.stages[-1].log2_width <= -40 * LOG2_10 < target.stages[-2].log2_width
    for stage in target.stages:
        with mpmath.workprec(500):
            c, z, dz, smallest = mpmath.mpc(*stage.center), mpmath.mpc(0), mpmath.mpc(0), mpmath.inf
            for n in range(stage.period):
                dz = 2 * z * dz + 1
                z = z * z + c
                smallest = min(smallest, abs(z)) if n < stage.period - 1 else smallest
            assert abs(z / dz) < mpmath.mpf(2) ** (stage.log2_width - 64)  # far below its width
            assert smallest > mpmath.mpf(2) ** -60


def test_find_writes_a_job_that_validates(tmp_path):
    out = tmp_path / "deep.toml"
    done = run_farm("find", *TIP, "--depth", "1e-100", "--size", "64x36", "--frames", "3",
                    "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "farm: find: wrote" in done.stderr and out.exists()
    spec = parse_text(out.read_text())
    assert spec.view.width == ("4", "1e-100") and spec.size == (64, 36) and spec.frames == 3
    assert len(spec.view.center[0]) > 100  # the digits the depth needs
    again = run_farm("find", *TIP, "--depth", "1e-100", "--out", str(out))
    assert again.returncode == 2 and "exists" in again.stderr  # not overwritten
    printed = run_farm("find", *TIP, "--depth", "1e-30", "--misiurewicz", "--frames", "1", "--quiet")
    assert printed.returncode == 0 and printed.stderr == ""
    assert parse_text(printed.stdout).view.width == ("1e-30", "1e-30")


@pytest.mark.parametrize("args,field", [
    (["x", "0", "--depth", "1e-10"], "RE"),
    (["0", "0", "--depth", "0"], "--depth"),
    (["0", "0", "--depth", "1", "--view", "0.01"], "--depth"),
    (["-1.7", "0", "--depth", "1e-10", "--size", "10x10"], "--size"),
    (["0", "0", "--depth", "1e-10", "--chain", "--structure", "1e-5"], "--structure"),
    (["0", "0", "--depth", "1e-10", "--structure", "1"], "--structure"),
    (["0", "0", "--depth", "1e-10", "--structure", "deep"], "--structure"),
])
def test_find_bad_input_one_line(tmp_path, args, field):
    out = tmp_path / "x.toml"
    done = run_farm("find", *args, "--out", str(out))
    assert done.returncode == 2 and done.stderr.startswith(f"farm: {field}")
    assert len(done.stderr.strip().splitlines()) == 1 and not out.exists()
