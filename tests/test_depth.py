"""Depth without a ceiling: counts at widths 1e-10000 and 1e-30000 against an independent
MPFR count (tests/reference_deep.py: the centre's orbit at full precision, each pixel's
delta from it in MPFR at 128 bits, plain steps with rebasing, the pixel mapping from
exact fractions), on a 24x16 and a 12x8 grid around c = i, a Misiurewicz point
(i -> -1+i -> -i -> -1+i ...): its neighbourhood has structure at every depth (counts
from about 26,600 to 26,700 at 1e-10000), and its reference is five points long at
any depth (farm/plan/references.py), so the test's time goes into the two counts
themselves (about 11 and 10 s on two cores). The same grid at 1e-1000 checks the
floatexp kernel's steps for orbit points below double's range (taken here for every
point by moving the threshold)."""

from __future__ import annotations

import pytest
from conftest import compare_counts, make_spec, render_frame
from reference_deep import deep_counts

from farm.numerics import bla, orbit
from farm.numerics import orbiters as period
from farm.plan import make_plan

AT_I = ("0", "1")
# 1e-10000 is the long one (its MPFR counts: half a minute on two cores): in the slow set
CASES = [pytest.param("1e-10000", (24, 16), 30_000, marks=pytest.mark.slow, id="1e-10000"),
         pytest.param("1e-30000", (12, 8), 90_000, id="1e-30000")]


def _render(cl_device, width, size, max_iter):
    plan = make_plan(make_spec(size=size, center=AT_I, width=(width, width), max_iter=max_iter,
                               tile=(16, 16), precision="auto"))
    assert plan.frames[0].precision == "perturb"
    refs = plan.references()
    assert refs is not None and refs.refs[0].kind == "misiurewicz"
    return render_frame(cl_device, plan, references=refs)[0]


@pytest.mark.parametrize("width,size,max_iter", CASES)
def test_counts_match_mpfr_far_below_1e_3000(cl_device, width, size, max_iter):
    want = deep_counts(AT_I, width, size, max_iter)
    assert (want > 0).all() and len(set(want.ravel().tolist())) > 5  # escaping, with structure
    got = _render(cl_device, width, size, max_iter)
    compare_counts(got, want, min_equal=0.99)


def test_floatexp_steps_where_the_orbit_is_tiny(cl_device, monkeypatch):
    """Orbit points below 2^-960 are kept as a mantissa and an exponent, and the
    floatexp kernel steps there in floatexp (no skip starts or crosses them). With the
    threshold moved above |Z| >= 1 (and the skip tables' with it: no skips), most steps
    of every pixel take that path (points with |Z| in [0.5, 1) have exponent 0 and go
    the double way): the counts still match MPFR's at 1e-1000."""
    size, max_iter = (16, 12), 5000
    want = deep_counts(AT_I, "1e-1000", size, max_iter)
    monkeypatch.setattr(orbit, "TINY_LOG2", 2)
    monkeypatch.setattr(period, "TINY", 4.0)
    monkeypatch.setattr(bla, "TINY", 4.0)
    plan = make_plan(make_spec(size=size, center=AT_I, width=("1e-1000", "1e-1000"),
                               max_iter=max_iter, tile=(16, 16), precision="perturb"))
    refs = plan.references()
    assert refs is not None and (refs.refs[0].points.exps != 0).mean() > 0.5  # "tiny" points
    got = render_frame(cl_device, plan, references=refs)[0]
    compare_counts(got, want, min_equal=0.99)


def test_counts_near_a_minibrot_at_1e_1000(cl_device):
    """A frame about 20 times as wide as a minibrot at 1e-1000 that `farm find` found
    (period 1972): its nucleus is the reference, and at the wrap a pixel's delta from
    Z(0) = 0 is about 1e-500, below double's range, while its square is as large as dc.
    The floatexp kernel stepped that delta in doubles (2 Z + d with Z = 0 underflowed
    to 0, so d <- dc) and every pixel came out interior; now the counts match MPFR's."""
    from farm.film.find import find

    target = find(("-1.7687", "0.0017"), -6.6, -1000 * 3.321928094887362)
    assert target.kind == "minibrot" and target.period > 1000
    size, max_iter, width = (16, 9), 40_000, "1e-1000"
    plan = make_plan(make_spec(size=size, center=target.center, width=(width, width),
                               max_iter=max_iter, tile=(16, 16), precision="auto"))
    refs = plan.references()
    assert refs is not None and refs.refs[0].kind == "nucleus"
    want = deep_counts(target.center, width, size, max_iter)
    assert (want > 0).mean() > 0.9 and len(set(want.ravel().tolist())) > 5
    got = render_frame(cl_device, plan, references=refs)[0]
    compare_counts(got, want, min_equal=0.99)


@pytest.mark.slow  # (the depth paths run at 1e-30000 above; this adds the 332k-bit store)
def test_a_frame_at_1e_100000_and_its_store(cl_device, tmp_path):
    """1e-100000 (332k-bit coordinates; the reference still five points): a 3x2 grid
    against MPFR, and the store keeps the width (25 digits in 40 characters: the
    exponent fits) and the reference's wrap and exponents."""
    from decimal import Decimal

    import h5py

    from farm.store.layout import create, read_references

    width, size, max_iter = "1e-100000", (3, 2), 300_000
    plan = make_plan(make_spec(size=size, center=AT_I, width=(width, width), max_iter=max_iter,
                               tile=(16, 16), precision="auto"))
    refs = plan.references()
    assert refs is not None and refs.refs[0].kind == "misiurewicz" and refs.refs[0].wrap == 2
    want = deep_counts(AT_I, width, size, max_iter)
    assert (want > 0).all() and len(set(want.ravel().tolist())) > 1
    got = render_frame(cl_device, plan, references=refs)[0]
    compare_counts(got, want, min_equal=0.99)
    create(tmp_path / "s.h5", plan, refs)
    with h5py.File(tmp_path / "s.h5") as f:
        assert Decimal(f["frames/width"][0].decode()) == Decimal(width)
        back = read_references(f)
    assert back is not None and back.refs[0].wrap == 2 and back.refs[0] == refs.refs[0]


def test_every_farm_process_parses_centres_of_any_length():
    """A 1e-10000 zoom's centre has 10,000 digits; mpmath 1.3 parses decimal strings
    through int(), which Python limits to 4300 digits, and the zoom's first frames
    failed in frame preparation's helper processes (they parse the centre for their
    coordinate axes). Importing the farm, as the command, MPI ranks and helpers
    (``python -m farm.compute.prep``) do, lifts the limit."""
    import subprocess
    import sys

    from conftest import checkout_env

    code = "import farm.compute.prep, sys; int('7' * 10000); print(sys.get_int_max_str_digits())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=checkout_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
