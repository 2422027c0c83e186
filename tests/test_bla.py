"""Iteration skipping: the quadratic skip tables, their error model, and images with and
without them."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from conftest import make_spec
from test_perturb import reference_of, render_perturbed, seahorse_point

from farm.numerics import bla
from farm.numerics import period as per
from farm.numerics.bla import EPS, apply, device_layout, orbit_maps, skip_table, skip_table_log2
from farm.plan import make_plan


def _orbit(center=("0", "1"), n=300):
    return per.orbit(per.parse(center, 400), 400, n, 4.0).values


def test_maps_are_compositions_of_single_steps():
    """The table's binary merges against the step-by-step recursion of a degree-4 map
    (d' = 2 Z d + d^2 + dc applied to A d + B dc + C d^2 + D d dc + E dc^2 + F d^3 +
    G d^2 dc + H d dc^2 + I dc^3 + J d^4 + K d^3 dc + L d^2 dc^2 + M d dc^3 + N dc^4,
    terms above degree 4 dropped): quadratic rows (F .. N = 0) and degree-4 rows
    (farm/numerics/highdegree.py) alike."""
    orbit = _orbit(seahorse_point(), 200)
    z = orbit[:, 0] + 1j * orbit[:, 1]
    checked = {"quadratic": 0, "high": 0}
    for table in (skip_table(orbit, 1e-4),  # a wide frame: the quadratic terms are kept
                  skip_table_log2(orbit, np.log2(1e-4), high=False)):
        for j in range(1, table.levels):
            for k in range(table.offsets[j + 1] - table.offsets[j]):
                row = table.offsets[j] + k
                if table.radius[row] == 0:
                    continue
                a, b, c, d, e, f, g, h, i, jj, kk, ll, mm, nn = 1, *[0] * 13
                for m in range(1 + k * 2**j, 1 + (k + 1) * 2**j):
                    t = 2 * z[m]
                    a, b, c, d, e, f, g, h, i, jj, kk, ll, mm, nn = (
                        t * a, t * b + 1, t * c + a * a, t * d + 2 * a * b, t * e + b * b,
                        t * f + 2 * a * c, t * g + 2 * a * d + 2 * b * c,
                        t * h + 2 * a * e + 2 * b * d, t * i + 2 * b * e,
                        # degree 4 of the square: 2 (degree 1)(degree 3) + (degree 2)^2
                        t * jj + 2 * a * f + c * c, t * kk + 2 * (a * g + b * f) + 2 * c * d,
                        t * ll + 2 * (a * h + b * g) + d * d + 2 * c * e,
                        t * mm + 2 * (a * i + b * h) + 2 * d * e, t * nn + 2 * b * i + e * e)
                got = table.coef[row, 0::2] + 1j * table.coef[row, 1::2]
                assert len(got) == 14
                assert np.allclose(got[:2], [a, b], rtol=1e-12, atol=0)
                high = np.any(got[5:] != 0)
                want = (c, d, e, f, g, h, i, jj, kk, ll, mm, nn) if high else (c, d, e)
                for have, exact in zip(got[2:2 + len(want)], want, strict=True):
                    # quadratic rows drop terms negligible at their radius
                    assert (have == 0 and not high) or np.isclose(have, exact, rtol=1e-10, atol=0)
                assert abs(got[2]) > 0  # at these widths the quadratic terms matter
                assert not high or abs(got[9]) > 0  # (degree-4 rows hold their own terms)
                checked["high" if high else "quadratic"] += 1
    assert checked["high"] >= 20 and checked["quadratic"] >= 20, checked


@pytest.mark.parametrize("eps", [2.0**-24, 2.0**-40])
@pytest.mark.parametrize("center", [("0", "1"), "misiurewicz"], ids=["c=i", "seahorse-misiurewicz"])
def test_error_model_bounds_what_a_map_drops(center, eps):
    """Exact perturbation steps (mpmath, 80 digits) from |d| just inside a map's radius
    land where the map says to within eps, relative (the error models of bla.py and of
    farm/numerics/highdegree.py), and not absurdly closer (the radii are not far too small):
    a larger eps than the kernel's makes the truncation dominate double rounding: a
    degree-4 map's error is within a factor 30 of eps unless its radius is set by the
    containment bound instead (a delta it passes reaches 2^-11 |Z|), and the quadratic
    maps' median error is. The deltas at the steps a degree-4 map passes stay below
    2^-10 |Z| (no rebase or escape is skipped over)."""
    center = seahorse_point() if center == "misiurewicz" else center
    orbit = _orbit(center, 4000)
    z = orbit[:, 0] + 1j * orbit[:, 1]
    dc = 1e-12 * (0.6 - 0.8j)
    table = skip_table(orbit, abs(dc), eps)
    errors, inner, quadratic = [], 0, []
    for j in range(1, table.levels):
        for k in (0, 1, 3, 7):
            row = table.offsets[j] + k
            if row >= table.offsets[j + 1] or table.radius[row] == 0:
                continue
            for angle in (0.3, 1.9, 4.0):
                d0 = 0.999 * table.radius[row] * np.exp(1j * angle)
                high = np.any(table.coef[row, 10:] != 0)
                reach = 0.0  # the largest |d| / |Z| at a step the skip passes
                with mpmath.workdps(80):
                    d, c = mpmath.mpc(d0), mpmath.mpc(dc)
                    for m in range(1 + k * 2**j, 1 + (k + 1) * 2**j):
                        if high and m > 1 + k * 2**j:  # a step the skip passes
                            assert abs(d) <= 2.0**-10 * abs(z[m]) * (1 + 1e-9)
                            inner += 1
                        if m > 1 + k * 2**j:
                            reach = max(reach, float(abs(d)) / abs(z[m]))
                        d = 2 * mpmath.mpc(z[m]) * d + d * d + c
                    exact = complex(d)
                errors.append(abs(apply(table, row, d0, dc) - exact) / abs(exact))
                if not high:
                    quadratic.append(errors[-1])
                elif errors[-1] < eps / 30:
                    assert reach >= 2.0**-11, (j, k, errors[-1] / eps, reach)
    assert len(errors) >= 30 and inner >= 100
    assert max(errors) <= eps
    assert len(quadratic) < 10 or np.median(quadratic) >= eps / 30


def test_the_kernels_layout_puts_each_map_at_its_middle_step():
    """device_layout: the map of level j from step m = 1 + k 2^j at row m - 1 + 2^(j-1),
    each row one map's, radii for max(|re|, |im|) (|d| <= sqrt(2) max(|re|, |im|), so
    never above the table's |d| radius over sqrt(2)), rows without a map radius 0."""
    orbit = _orbit(seahorse_point(), 1000)
    for table in (skip_table(orbit, 1e-12),
                  skip_table_log2(orbit, np.log2(1e-12), floatexp=True)):
        coef, radius = device_layout(table)
        filled = np.zeros(len(radius), bool)
        for j in range(1, table.levels):
            lo, hi = table.offsets[j], table.offsets[j + 1]
            for k in range(hi - lo):
                row = k * 2**j + 2 ** (j - 1)
                assert not filled[row]  # one map a row
                filled[row] = True
                assert np.array_equal(coef[row], table.coef[lo + k])
                if table.log2_radii:
                    assert radius[row] == table.radius[lo + k] - 0.5
                else:
                    assert radius[row] * np.sqrt(2) <= table.radius[lo + k]
                    assert radius[row] * np.sqrt(2) >= table.radius[lo + k] * (1 - 1e-15)
        assert filled.sum() == table.offsets[-1] and not np.any(coef[~filled])
        empty = -np.inf if table.log2_radii else 0.0
        assert np.all(radius[~filled] == empty) and table.valid.sum() >= 100


def test_floatexp_tables_hold_log2_radii():
    """The floatexp table (deltas below double's range) is the double table with log2
    radii, and keeps its maps at depths where the largest |dc| is no double."""
    orbit = _orbit(seahorse_point(), 3000)
    plain = skip_table_log2(orbit, np.log2(1e-20), high=False)  # floatexp tables are quadratic
    fx = skip_table_log2(orbit, np.log2(1e-20), floatexp=True)
    assert np.array_equal(plain.offsets, fx.offsets) and np.array_equal(plain.coef, fx.coef)
    assert np.allclose(np.exp2(fx.radius), plain.radius, rtol=1e-12, atol=0)
    assert fx.shift == plain.shift
    deep = skip_table_log2(orbit, -1500.0, floatexp=True)  # |dc| <= 2^-1500 (about 1e-452)
    assert deep.valid.sum() >= plain.valid.sum() >= 200


def test_a_references_maps_serve_every_frame_as_a_fresh_build(monkeypatch):
    """The maps of an orbit are built once and give each frame's |dc| bound the table a
    build from scratch gives it, bit for bit (quadratic and third degree); maps of the
    other degree are refused; FramePrep builds a reference's maps once for all its frames."""
    orbit = _orbit(seahorse_point(), 3000)
    for high in (False, True):
        maps = orbit_maps(orbit, high)
        for log2_c in (-40.0, -60.0, -75.5):
            fresh = skip_table_log2(orbit, log2_c, high=high)
            shared = skip_table_log2(orbit, log2_c, high=high, maps=maps)
            assert shared.valid.sum() > 100
            for name in ("coef", "radius", "offsets"):
                assert np.array_equal(getattr(fresh, name), getattr(shared, name)), name
            assert fresh.shift == shared.shift
        with pytest.raises(ValueError):
            skip_table_log2(orbit, -40.0, high=not high, maps=maps)

    from farm.compute.prep import FramePrep
    spec = make_spec(size=(64, 36), center=("-0.743643887037158704752191506114774",
                                            "0.131825904205311970493132056385139"),
                     width=("1e-18", "1e-21"), frames=4, max_iter=20000, precision="perturb")
    plan = make_plan(spec)
    refs = plan.references()
    assert len(refs.refs) == 1 and refs.refs[0].period > 0  # one nucleus for the four frames
    built = []
    monkeypatch.setattr(bla, "orbit_maps", lambda *a: built.append(a) or orbit_maps(*a))
    import farm.compute.perturbation as pert
    monkeypatch.setattr(pert, "orbit_maps", bla.orbit_maps)
    prep = FramePrep(plan, refs)
    tables = [prep.prepare(f).result().table for f in plan.frames]
    assert len(built) == 1
    assert len({t.radius.tobytes() for t in tables}) == 4  # each frame its own radii


def test_radii_respect_the_kernel_precheck():
    """The kernel skips only when max(|d.re|, |d.im|) < 2^-shift max(|Z.re|, |Z.im|):
    every map's radius must be below that bound at its start."""
    orbit = _orbit(("0", "1"), 4000)
    table = skip_table(orbit, 1e-40)
    big = np.maximum(np.abs(orbit[:, 0]), np.abs(orbit[:, 1]))
    assert table.shift >= 8  # (degree-4 radii reach 2^-10 |Z|, the containment bound)
    for j in range(1, table.levels):
        r = table.radius[table.offsets[j]:table.offsets[j + 1]]
        start = 1 + np.arange(len(r)) * 2**j
        assert np.all(r <= big[start] * 2.0 ** -(table.shift + 1))


@pytest.mark.parametrize("width", ["1e-250", "1e-400"], ids=["double", "floatexp"])
@pytest.mark.parametrize("center", [("0", "1"), "misiurewicz"], ids=["c=i", "seahorse-misiurewicz"])
def test_images_with_and_without_skipping_agree(cl_device, center, width):
    """Double deltas at 1e-250, floatexp deltas (pixel spacing below 1e-305) at 1e-400."""
    center = seahorse_point() if center == "misiurewicz" else center
    plan = make_plan(make_spec(size=(48, 32), center=center, width=(width, width),
                               max_iter="auto", tile=(48, 32), precision="perturb"))
    skipped, _ = render_perturbed(cl_device, plan)
    plain, _ = render_perturbed(cl_device, plan, skipping=False)
    assert (skipped == plain).mean() >= 0.99
    refs = reference_of(plan)
    from farm.compute.perturbation import perturbed_frame

    table = perturbed_frame(plan, refs, plan.frames[0]).table
    assert table.levels >= 8 and table.valid.sum() >= 100  # long skips on offer


@pytest.mark.parametrize("width", ["1e-250", "1e-400"], ids=["double", "floatexp"])
def test_the_kernel_takes_the_skips(cl_device, monkeypatch, width):
    """Guards the agreement test above against skipping being silently off: with a
    table whose maps send every delta to 0, a loop that skips renders another image."""
    import farm.compute.perturbation as pert

    def sabotaged(*args, **kw):
        t = skip_table_log2(*args, **kw)
        return type(t)(np.zeros_like(t.coef), t.radius, t.offsets, t.log2_radii, t.shift)

    plan = make_plan(make_spec(size=(24, 16), center=("0", "1"), width=(width, width),
                               max_iter="auto", tile=(24, 16), precision="perturb"))
    honest, _ = render_perturbed(cl_device, plan)
    monkeypatch.setattr(pert, "skip_table_log2", sabotaged)
    broken, _ = render_perturbed(cl_device, plan)
    assert (honest != broken).mean() > 0.5
    assert EPS == 2.0**-53
