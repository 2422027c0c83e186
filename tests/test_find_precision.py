"""The precision `farm find`'s Newton runs at (farm/numerics/newton.py, farm/film/find.py):
told the scale where the roots lie and where its guess is known, a solve raises its
precision as it converges and runs only its last two iterations at the full bits; it
reaches the same root as today's all-full-precision Newton (to 2^(8 - bits) relative,
the solve's own tolerance), of the same period or preperiod checked at the full bits,
and `farm find` the same target."""

from __future__ import annotations

import math

import pytest

from farm.film import find
from farm.numerics import far_newton, newton
from farm.numerics import period as per
from farm.numerics.mpfr_points import precision

TIP = ("-1.7687", "0.0017")  # near the tip of the antenna: fast orbits, short periods
LOG2_10 = math.log2(10)
VIEW = math.log2(0.01)


@pytest.fixture
def precisions(monkeypatch):
    """The bits of every Newton iteration (one orbit each), in order."""
    used: list[int] = []
    orbiter = newton._newton_orbiter

    def spy(c, bits):
        used.append(bits)
        return orbiter(c, bits)

    monkeypatch.setattr(newton, "_newton_orbiter", spy)
    return used


def _same_root(a, b, bits: int) -> bool:
    with precision(bits):
        return per.log2_abs(a - b) <= 8 - bits + per.log2_abs(a)


def _rising(used: list[int], bits: int) -> None:
    """Precisions that never fall, end with two iterations at the full bits and only two."""
    assert used == sorted(used) and used[-2:] == [bits, bits] and used.count(bits) == 2
    assert used[0] < bits


@pytest.mark.parametrize("decimals", [150, pytest.param(1500, marks=pytest.mark.slow)])
def test_misiurewicz_refined_as_it_converges(decimals, precisions):
    """A Misiurewicz point found in a view of 1e-150 (1e-1500), refined to the bits of a
    1e-300 (1e-3000) view as `farm find`'s descent does: the same root as with every
    iteration at full precision, two of them at full precision instead of all, and
    the same preperiod at the full bits."""
    view = -decimals * LOG2_10
    center, k, q = find.descend(TIP, VIEW, view, lambda text: None)
    known, bits = find.bits_for(view), find.bits_for(2 * view)
    guess = per.parse(center, bits)
    full = per.misiurewicz(guess, k, q, bits)
    iterations = len(precisions)
    precisions.clear()
    rising = per.misiurewicz(guess, k, q, bits, scale=view, guess_bits=known - find.GUESS_SLACK)
    assert full is not None and rising is not None and _same_root(full, rising, bits)
    _rising(precisions, bits)
    assert iterations > 2
    got = per.preperiodic_orbit(rising, q, bits, k + q)
    assert got is not None and got[1] == k


def _next_search(refined: bool):
    """The descent's search below 1e-100 from the point found there: (its centre, refined
    to the next view's bits as find.misiurewicz does, or as found; that point c0; the
    guess 2^-8 of the next view off it; the view; its bits)."""
    center, k, q = find.descend(TIP, VIEW, -100 * LOG2_10, lambda text: None)
    view = -200 * LOG2_10
    bits = find.bits_for(view)
    c0 = per.misiurewicz(per.parse(center, bits), k, q, bits)
    if refined:
        center = (point := per.point(c0, bits)).re, point.im
    guess = per.parse(per.moved(center, math.cos(find.CHAIN_ANGLE), math.sin(find.CHAIN_ANGLE),
                                math.floor(view) - 8, bits), bits)
    return center, c0, guess, view, bits


def test_misiurewicz_from_a_view_away_with_the_known_one_divided_out(precisions):
    """The descent's search for the next point: Newton from 2^-8 of the view off a known
    point, that point divided out, at a precision rising from the view's: the root
    all-full-precision Newton reaches from there, not the known point."""
    center, c0, guess, view, bits = _next_search(refined=False)
    ks, _ = find._preperiods(center, view, 1)
    found = 0
    for k2 in ks:
        full = per.misiurewicz(guess, k2, 1, bits, other_than=c0)
        precisions.clear()
        rising = per.misiurewicz(guess, k2, 1, bits, other_than=c0, scale=view)
        assert (full is None) == (rising is None)
        if full is not None:
            found += 1
            assert _same_root(full, rising, bits)
            assert per.log2_abs(rising - c0) > view - 10  # another point than the known one
            _rising(precisions, bits)
    assert found


def test_misiurewicz_from_afar_then_at_full_precision_is_the_same_root():
    """find.misiurewicz's way: the known point refined and its orbit the reference, Newton
    in perturbation from 2^-8 of the view (far_newton.py), then the few full-precision
    iterations: the root all-full-precision Newton reaches from the guess."""
    center, c0, guess, view, bits = _next_search(refined=True)
    ks, reference = find._preperiods(center, view, 1)
    afar = 0
    for k2 in ks:
        full = per.misiurewicz(guess, k2, 1, bits, other_than=c0)
        start = find._far(far_newton.misiurewicz, per.parse(center, bits), reference, guess, k2, 1,
                          bits, view, True)
        if full is not None and start is not None:
            afar += 1
            near = per.misiurewicz(start, k2, 1, bits, other_than=c0, scale=view,
                                   guess_bits=find._far_known(start, view))
            assert near is not None and _same_root(full, near, bits)
    assert afar


def _minibrot(decimals: int) -> find.Stage:
    return find.find(TIP, VIEW, -decimals * LOG2_10).stages[-1]


@pytest.mark.parametrize("decimals", [300, pytest.param(3000, marks=pytest.mark.slow)])
def test_nucleus_refined_as_it_converges(decimals, precisions):
    """A minibrot's nucleus as found in its view (1e-150 wide, 1e-1500), refined to the
    bits of its own width (1e-300, 1e-3000) as `farm find` does: the same nucleus as
    with every iteration at full precision, two of them at full precision, of the
    same period at the full bits."""
    stage = _minibrot(decimals)
    known, bits = find.bits_for(stage.log2_view), find.bits_for(stage.log2_width)
    found = per.point(per.parse(stage.center, known), known)  # the digits its view resolves
    guess = per.parse((found.re, found.im), bits)
    full = per.nucleus(guess, stage.period, bits)
    precisions.clear()
    rising = per.nucleus(guess, stage.period, bits, scale=stage.log2_view,
                         guess_bits=known - find.GUESS_SLACK)
    assert full is not None and rising is not None and _same_root(full, rising, bits)
    _rising(precisions, bits)
    assert per.lowest_return(rising, stage.period, bits) == stage.period


def test_without_a_scale_every_iteration_at_full_precision(precisions):
    """Callers that give no scale (the references) get today's Newton: every iteration
    at the bits asked for."""
    c = per.nucleus(per.parse(("-1.75", "0.001"), 300), 3, 300)
    assert c is not None and precisions and set(precisions) == {300}


@pytest.mark.parametrize("misi", [False, True])
def test_find_reaches_the_same_target(misi, monkeypatch):
    """`farm find` to 1e-300 (a minibrot, a Misiurewicz point) finds the same target with
    its precision rising as with today's all-full-precision Newton: the same period,
    preperiod and width, the centre the same to the depth's bits."""
    depth = -300 * LOG2_10
    rising = find.find(TIP, VIEW, depth, misi=misi)
    monkeypatch.setattr(newton._Precision, "__init__", _all_full)
    full = find.find(TIP, VIEW, depth, misi=misi)
    assert (rising.kind, rising.period, rising.preperiod) == (full.kind, full.period, full.preperiod)
    assert rising.log2_width == pytest.approx(full.log2_width, nan_ok=True)
    bits = find.bits_for(depth)
    assert _same_root(per.parse(full.center, bits + 64), per.parse(rising.center, bits + 64), bits)


def _all_full(self, bits, scale, guess_bits):
    self.full, self.scale, self.bits = bits, math.inf, bits
