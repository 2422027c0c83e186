"""Minibrots along a Misiurewicz point's spiral (farm/numerics/spiral.py, find.spiral):
the self-similarity they rest on, the member `follow` reaches against plain Newton's
method from one long jump, its period and width checked with mpmath, the scan that
stops at such a nucleus, and `farm find --structure` for a minibrot."""

from __future__ import annotations

import math

import mpmath
import pytest
from conftest import make_spec, run_farm

from farm.film import find
from farm.numerics import period as per
from farm.numerics.mpfr_points import log2_abs, precision
from farm.numerics.newton import cycle_multiplier
from farm.numerics.scan import scan
from farm.numerics.spiral import follow, levels
from farm.plan import make_plan, references
from farm.spec import parse_text

TIP = ("-1.7687", "0.0017")
LOG2_10 = math.log2(10)
VIEW = -12  # the Misiurewicz point's view (log2 of its width)
BITS = 1400


def _family():
    """A Misiurewicz point near the tip (exact to BITS), its cycle multiplier, and a
    minibrot 2^-18 of its view from it: (point, k, q, lambda, nucleus, period, width)."""
    center, k, q = find.misiurewicz(TIP, VIEW, lambda text: None)
    point = per.misiurewicz(per.parse(center, BITS), k, q, BITS, scale=VIEW, guess_bits=100)
    exact = per.point(point, BITS)
    moved = per.moved((exact.re, exact.im), 0.2, 0.15, VIEW - 18, 200)
    first = find.minibrot(moved, VIEW - 18, lambda text: None)
    return (point, k, q, cycle_multiplier(point, k, q, BITS), per.parse(first.center, BITS),
            first.period, first.log2_width)


def _mp_nucleus_period(c: tuple[str, str], p: int, bits: int) -> int:
    """The first k <= p at which z_k(c) is within 2^(-bits/2) of 0, in mpmath."""
    with mpmath.workprec(bits + 64):
        cc, z = mpmath.mpc(*c), mpmath.mpc(0)
        for k in range(1, p + 1):
            z = z * z + cc
            if abs(z) < mpmath.mpf(2) ** (-bits // 2):
                return k
    return 0


def test_levels_halve_down_to_one():
    assert levels(1, 0) == [1]
    assert levels(8, 0) == [1, 2, 4, 8]
    assert levels(100, 10) == [1, 2, 4, 8, 15, 30, 60, 100]  # the one before: n/2 + 10
    assert levels(10, 20) == [10]  # an offset past n: the last level alone


def test_the_twin_one_turn_in():
    """The nucleus of period P + q at (nucleus - point) / lambda from the point (Newton's
    method from there): |lambda|^2 times narrower, and the prediction off by far less
    than the distance (the self-similarity spiral.py rests on)."""
    point, k, q, lam, c0, p0, w0 = _family()
    with precision(BITS):
        guess = point + (c0 - point) / lam
    c1 = per.nucleus(guess, p0 + q, BITS, divide=False)
    assert c1 is not None and per.lowest_return(c1, p0 + q, BITS) == p0 + q
    with precision(BITS):
        assert log2_abs(c1 - guess) < log2_abs(c1 - point) - 12
    w1 = find._width(c1, p0 + q, BITS)
    assert abs((w0 - w1) - 2 * log2_abs(lam)) < 0.05


def test_follow_reaches_the_member_plain_newton_finds():
    """follow's member at about 2^-1000: the root plain Newton's method reaches from the
    one-jump prediction, iterated to convergence at full precision, to within 2^-(bits -
    16); a nucleus of exactly its period (mpmath); as wide as predicted."""
    point, k, q, lam, c0, p0, w0 = _family()
    target = -1000
    c, p, width = follow(point, q, lam, c0, p0, w0, target, VIEW, find.bits_for)
    n = (p - p0) // q
    assert (p - p0) % q == 0 and n >= 100 and abs(width - target) <= log2_abs(lam)
    bits = find.bits_for(target)
    with precision(bits):
        guess = point + (c0 - point) * (1 / lam) ** n
    plain = per.nucleus(guess, p, bits, divide=False)
    assert plain is not None
    with precision(bits):
        assert log2_abs(plain - c) < -(bits - 16)
    exact = per.point(c, bits)
    assert _mp_nucleus_period((exact.re, exact.im), p, bits) == p
    assert abs(find._width(c, p, bits) - width) < 0.05


@pytest.mark.parametrize("structure", [30, 140])  # far above half the digits, and near it
def test_find_a_minibrot_on_a_spiral(structure):
    """find with --structure above half the depth's digits: a minibrot 2^-1 to 2^-6 of
    the depth wide, of exactly its period (mpmath), found along the spiral."""
    said: list[str] = []
    depth = -300 * LOG2_10
    target = find.find(TIP, math.log2(0.01), depth, say=said.append,
                       log2_structure=-structure * LOG2_10)
    assert any("spiral" in line for line in said)
    assert target.kind == "minibrot" and depth - 6 <= target.log2_width <= depth - 1
    assert _mp_nucleus_period(target.center, target.period, find.bits_for(depth)) == target.period


def test_deep_minibrots_follow_a_spiral_by_default(monkeypatch):
    """Below SPIRAL_BELOW a minibrot's descent stops at a STRUCTURE_SHARE-th of the depth's
    digits, and the spiral goes on; above it the descent goes to half the digits."""
    said: list[str] = []
    monkeypatch.setattr(find, "SPIRAL_BELOW", -200 * LOG2_10)
    find.find(TIP, math.log2(0.01), -300 * LOG2_10, say=said.append)
    assert any("spiral" in line for line in said)
    said.clear()
    monkeypatch.setattr(find, "SPIRAL_BELOW", -400 * LOG2_10)
    find.find(TIP, math.log2(0.01), -300 * LOG2_10, say=said.append)
    assert not any("spiral" in line for line in said)


def test_the_scan_stops_at_a_nucleus_on_a_spiral():
    """A nucleus whose orbit first shadows a repelling cycle (Brent's returns see it
    repel) is still known at its period, in closed form: the scan ends there rather
    than running to its limit."""
    depth = -300 * LOG2_10
    target = find.find(TIP, math.log2(0.01), depth, log2_structure=-30 * LOG2_10)
    got = scan(target.center, find.bits_for(depth), [depth - 12], 100_000, repeats=True)
    assert got.steps == target.period and got.returns == target.period and got.cycle is not None


def test_find_structure_for_a_minibrot_on_the_command_line(tmp_path):
    out = tmp_path / "spiral.toml"
    done = run_farm("find", *TIP, "--depth", "1e-300", "--structure", "1e-30", "--size", "64x36",
                    "--frames", "2", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "spiral" in done.stderr
    text = out.read_text()
    assert "--structure 1e-30" in text.splitlines()[0]  # how to find it again
    spec = parse_text(text)
    assert spec.view.width == ("4", "1e-300") and len(spec.view.center[0]) > 300


def test_a_nucleus_past_the_scans_bound_is_still_the_reference(monkeypatch):
    """A frame centred on a spiral's nucleus whose period is past the scan's cost bound
    (lowered here) but within the iteration limit: the scan looks on to the limit
    and the reference is that nucleus, one period long, not the centre's orbit to the
    limit (at 1e-100000 on two cores: hours)."""
    depth = -300 * LOG2_10
    target = find.find(TIP, math.log2(0.01), depth, log2_structure=-30 * LOG2_10)
    monkeypatch.setattr(references, "SCAN_MIN_STEPS", 200)
    monkeypatch.setattr(references, "SCAN_BIT_STEPS", 1.0)
    steps, period_steps = references.scan_steps(20_000, 1200)
    assert steps == 200 < target.period < period_steps
    plan = make_plan(make_spec(size=(32, 18), center=target.center, width=("1e-300", "1e-300"),
                               max_iter=20_000, precision="perturb", tile=(32, 18)))
    refs = plan.references()
    assert refs is not None and [(r.kind, r.period) for r in refs.refs] == [("nucleus", target.period)]
