"""A zoom into nothing (issue 10, item 5): `farm validate` and `farm render` warn, one
line on stderr, when the frames past some width show no part of the set's edge; and
they do not for a good deep centre."""

from __future__ import annotations

import pytest
from conftest import make_spec, run_farm

from farm.plan import make_plan, structure

SEAHORSE = ("-0.743643887037158704752191506114774", "0.131825904205311970493132056385139")
CASES = {
    # (centre, widths): expected warning text, or None
    "too-few-digits": (("-0.7436438870371587", "0.1318259042053120"), ("4", "1e-30"),
                       "outside the set", "16 decimals"),
    "outside": (("0.5", "0.5"), ("4", "1e-10"), "outside the set", "escapes after 5 iterations"),
    "inside": (("-0.1", "0.1"), ("4", "1e-12"), "inside the set", "period 1"),
    "seahorse": (SEAHORSE, ("4", "1e-22"), None, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_warning_names_width_frame_and_remedy(case):
    center, widths, kind, detail = CASES[case]
    plan = make_plan(make_spec(size=(64, 36), center=center, width=widths, frames=40,
                               max_iter="auto", tile=(64, 36)))
    lines = structure.check(plan, plan.references())
    if kind is None:
        assert lines == []
        return
    assert len(lines) == 1
    line = lines[0]
    assert kind in line and detail in line
    assert line.startswith("view.center: frames ") and "end the zoom at width" in line
    first = int(line.split("frames ")[1].split("-")[0])
    # the first frame named is the first whose view fits inside a quarter of the estimate
    fate = plan.references().centre if plan.references() else None
    found = structure.empty_from(plan, fate if fate else structure.fate_of(plan))
    assert found is not None and found[0] == first and 0 < first < 39


def test_the_warned_frames_are_flat(cl_device):
    """Past the frame the warning names, a render shows one count (outside: a smooth
    gradient of few distinct counts; here the view is far from the set)."""
    from conftest import render_frame

    plan = make_plan(make_spec(size=(32, 18), center=("0.5", "0.5"), width=("4", "1e-6"), frames=30,
                               max_iter=500, tile=(32, 18)))
    first, _ = structure.empty_from(plan, structure.fate_of(plan))
    before, _ = render_frame(cl_device, plan, 1)
    after, _ = render_frame(cl_device, plan, first + 2)
    assert len(set(before.ravel())) > 3 and len(set(after.ravel())) == 1


@pytest.mark.parametrize("command", ["validate", "render"])
def test_cli_warns_on_stderr_and_goes_on(write_job, command):
    job = write_job(size=(32, 18), center=("-0.7436438870371587", "0.1318259042053120"),
                    width=("1e-3", "1e-24"), frames=6, tile=(32, 18), max_iter="auto")
    args = [command, str(job)] + (["--no-video", "--quiet"] if command == "render" else [])
    done = run_farm(*args)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("farm: warning:")]
    assert len(warnings) == 1 and "give more digits" in warnings[0]
    assert "warning" not in done.stdout


def test_cli_good_centre_no_warning(write_job):
    job = write_job(size=(32, 18), center=SEAHORSE, width=("1e-3", "1e-22"), frames=4,
                    tile=(32, 18), max_iter="auto")
    done = run_farm("validate", str(job))
    assert done.returncode == 0 and "warning" not in done.stderr
    assert "reference  nucleus of period 8007" in done.stdout
