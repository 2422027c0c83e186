"""Job spec: defaults, canonical text, and every class of bad input."""

from __future__ import annotations

import os

import pytest
from conftest import job_text, make_spec, run_farm

from farm import spec as specmod
from farm.errors import SpecError


def test_defaults_and_canonical_round_trip():
    spec = make_spec()
    assert spec.iterations.escape_radius == 2.0
    assert spec.output.store == "renders/test.h5" and spec.output.video == "renders/test.mp4"
    text = specmod.canonical_text(spec)
    again = specmod.parse_text(text, name="other")
    assert again == spec
    assert specmod.canonical_text(again) == text
    assert specmod.spec_hash(again) == specmod.spec_hash(spec)


def test_centres_of_any_length_parse():
    """A deep centre has as many digits as its depth: 40,000 digits (beyond Python's
    4300-digit limit on int() of a string, which Fraction went through) parse, keep
    every digit and round-trip through the canonical text."""
    digits = "".join(str((7 * k * k + 3) % 10) for k in range(40_000))
    re, im = "-0.75" + digits, "0.1" + digits[::-1]
    spec = make_spec(center=(re, im), width=("1e-39990", "1e-39990"))
    assert spec.view.center == (re, im)
    assert specmod.parse_text(specmod.canonical_text(spec)) == spec


def test_single_width_string_means_a_still():
    spec = specmod.parse_text(job_text().replace('width = ["3", "3"]', 'width = "2.5"'))
    assert spec.view.width == ("2.5", "2.5")


BAD = [
    # (description, edit of the default job text, field named in the error)
    ("toml syntax", lambda t: t.replace("[image]", "[image"), "TOML"),
    ("missing key", lambda t: t.replace("frames = 1\n", ""), "animation.frames"),
    ("typo key", lambda t: t.replace("frames = 1", "frams = 1"), "animation.frams"),
    ("typo section", lambda t: t.replace("[render]", "[rendr]"), "rendr"),
    ("center not decimal", lambda t: t.replace('"-0.75"', '"-0.7.5"'), "view.center[0]"),
    ("center as float", lambda t: t.replace('"-0.75"', "-0.75"), "view.center[0]"),
    ("center one value", lambda t: t.replace('["-0.75", "0.1"]', '["-0.75"]'), "view.center"),
    ("zero width", lambda t: t.replace('width = ["3", "3"]', 'width = ["3", "0"]'), "view.width[1]"),
    ("negative width", lambda t: t.replace('width = ["3", "3"]', 'width = ["-3", "1"]'),
     "view.width[0]"),
    ("zero size", lambda t: t.replace("size = [24, 16]", "size = [0, 16]"), "image.size[0]"),
    ("absurd size", lambda t: t.replace("size = [24, 16]", "size = [24, 1000000]"), "image.size[1]"),
    ("too many pixels", lambda t: t.replace("size = [24, 16]", "size = [30000, 30000]"),
     "image.size"),
    ("frames zero", lambda t: t.replace("frames = 1", "frames = 0"), "animation.frames"),
    ("frames not int", lambda t: t.replace("frames = 1", 'frames = "ten"'), "animation.frames"),
    ("max iter word", lambda t: t.replace("max = 200", 'max = "lots"'), "iterations.max"),
    ("unknown precision", lambda t: t.replace('precision = "auto"', 'precision = "f32"'),
     "render.precision"),
    ("tiny tile", lambda t: t.replace("tile = [16, 16]", "tile = [1, 16]"), "render.tile[0]"),
    ("store suffix", lambda t: t + '[output]\nstore = "out.txt"\n', "output.store"),
    ("absurd exponent", lambda t: t.replace('width = ["3", "3"]', 'width = ["3", "1e-99999999999999999999"]'),
     "view.width[1]"),
    ("far centre, long", lambda t: t.replace('"-0.75"', '"-1001.' + "7" * 5000 + '"'), "view.center[0]"),
]


@pytest.mark.parametrize("what,edit,field", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_names_the_field(what, edit, field):
    with pytest.raises(SpecError) as exc:
        specmod.parse_text(edit(job_text()), source="job.toml")
    assert exc.value.field == field
    message = str(exc.value)
    assert "\n" not in message and message.startswith("job.toml: " + field)


def test_typo_gets_a_suggestion():
    with pytest.raises(SpecError, match="did you mean 'frames'"):
        specmod.parse_text(job_text().replace("frames = 1", "frams = 1"))


def test_toml_error_names_the_line():
    with pytest.raises(SpecError, match="line"):
        specmod.parse_text(job_text().replace("[image]", "[image"))


def test_unreadable_files(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        specmod.load(tmp_path / "nope.toml")
    with pytest.raises(SpecError, match="cannot be read"):
        specmod.load(tmp_path)  # a directory
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SpecError, match="cannot be read"):
        specmod.load(binary)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_as_user(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(SpecError, match="not writable"):
        specmod.check_writable(locked / "x.h5", "output.store")


def test_unwritable_output(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(SpecError, match="not a directory"):
        specmod.check_writable(afile / "sub" / "x.h5", "output.store")
    with pytest.raises(SpecError, match="is a directory"):
        specmod.check_writable(tmp_path, "output.store")


@pytest.mark.parametrize("command", ["validate", "render"])
def test_cli_bad_spec_one_line_exit_2_nothing_written(tmp_path, write_job, command):
    job = write_job(frames=0)
    result = run_farm(command, str(job), cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "animation.frames" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.toml"]


def test_cli_unwritable_store_exit_2(tmp_path, write_job):
    (tmp_path / "blocker").write_text("")
    job = write_job(extra="")
    text = job.read_text().replace(str(tmp_path / "job.h5"), str(tmp_path / "blocker" / "x.h5"))
    job.write_text(text)
    result = run_farm("render", str(job), "--no-video", cwd=tmp_path)
    assert result.returncode == 2 and "output.store" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_bad_option_exit_2():
    result = run_farm("render")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    result = run_farm("status", "/nonexistent/store.h5")
    assert result.returncode == 2 and "does not exist" in result.stderr
