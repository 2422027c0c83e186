"""Iteration skipping: the bilinear-approximation table, and images with and without it."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from conftest import make_spec
from test_perturb import reference_of, render_perturbed, seahorse_point

import farm.numerics as num
from farm.numerics.bla import EPS, bla_table
from farm.plan import make_plan


def _orbit(center=("0", "1"), n=300):
    return num.reference_orbit(center, 400, n, 4.0)


def test_maps_are_compositions_of_single_steps():
    orbit = _orbit(seahorse_point(), 200)
    z = orbit[:, 0] + 1j * orbit[:, 1]
    ab, _, off = bla_table(orbit, 1e-30)
    for j in range(len(off) - 1):
        for k in range(off[j + 1] - off[j]):
            start, a, b = 1 + k * 2**j, 1.0 + 0j, 0j
            for m in range(start, start + 2**j):  # d <- 2 Z(m) d + dc, composed
                a, b = 2 * z[m] * a, 2 * z[m] * b + 1
            got = ab[off[j] + k]
            assert np.allclose([got[0] + 1j * got[1], got[2] + 1j * got[3]], [a, b], rtol=1e-12, atol=0)


def test_a_map_inside_its_radius_matches_the_steps_it_skips():
    """Exact perturbation steps (mpmath, 60 digits) from |d| = R / 2 land where the map
    says, to well within double rounding of the result."""
    orbit = _orbit(("0", "1"), 4000)
    dc = 1e-200 * (0.6 - 0.8j)
    ab, r, off = bla_table(orbit, abs(dc))
    z = orbit[:, 0] + 1j * orbit[:, 1]
    checked = 0
    for j in range(1, len(off) - 1, 3):
        idx = off[j] + 1  # map k = 1 of level j
        if r[idx] == 0:
            continue
        d0 = 0.5 * r[idx] * (0.28 + 0.96j)
        a, b = ab[idx][0] + 1j * ab[idx][1], ab[idx][2] + 1j * ab[idx][3]
        with mpmath.workdps(60):
            d, c = mpmath.mpc(d0), mpmath.mpc(dc)
            for m in range(1 + 2**j, 1 + 2 * 2**j):
                d = 2 * mpmath.mpc(z[m]) * d + d * d + c
            exact = complex(d)
        assert abs(a * d0 + b * dc - exact) <= 1e-13 * abs(exact)
        checked += 1
    assert checked >= 2
    assert EPS == 2.0**-53


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
    with num.workprec(plan.frames[0].bits):
        dc_max = num.float_at_least(plan.frames[0].spacing * 30)
    _, _, off = bla_table(reference_of(plan), dc_max)
    assert len(off) - 1 >= 8  # the table offers long skips at this depth


@pytest.mark.parametrize("width", ["1e-250", "1e-400"], ids=["double", "floatexp"])
def test_the_kernel_takes_the_skips(cl_device, monkeypatch, width):
    """Guards the agreement test above against skipping being silently off: with a
    table whose maps send every delta to 0, a loop that skips renders another image."""
    import farm.compute.render as render_mod

    def sabotaged(orbit, dc_max):
        ab, r, off = bla_table(orbit, dc_max)
        return np.zeros_like(ab), r, off

    plan = make_plan(make_spec(size=(24, 16), center=("0", "1"), width=(width, width),
                               max_iter="auto", tile=(24, 16), precision="perturb"))
    honest, _ = render_perturbed(cl_device, plan)
    monkeypatch.setattr(render_mod, "bla_table", sabotaged)
    broken, _ = render_perturbed(cl_device, plan)
    assert (honest != broken).mean() > 0.5
