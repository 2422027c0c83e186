"""`farm preview`: the first frame, the key frames (and one between keys), the last, small, on
one contact sheet (farm/film/preview.py, farm/encode/sheet.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from conftest import run_farm
from PIL import Image

from farm import numerics as num
from farm import spec as specmod
from farm.encode.sheet import layout
from farm.film.preview import picks, preview_spec
from farm.plan.curve import frame_widths
from farm.store.reader import Store

JOB = """
[view]
center = ["-0.743643887037158704752191506114774", "0.131825904205311970493132056385139"]
[image]
size = [64, 36]
[animation]
fps = 5
[[animation.keys]]
time = 0
width = "3"
[[animation.keys]]
time = 2
width = "2e-3"
[[animation.keys]]
time = 3
width = "2e-3"
[[animation.keys]]
time = 4.4
width = "0.05"
[iterations]
max = 300
[color]
smoothing = 0
"""


def test_picks_are_first_keys_between_and_last(tmp_path):
    spec = specmod.parse_text(JOB, name="film")
    chosen = picks(spec)
    assert [p.frame for p in chosen] == [0, 5, 10, 12, 15, 18, 22]
    assert [p.key for p in chosen] == [0, None, 1, None, 2, None, 3]
    widths = frame_widths(spec)
    for p in chosen:  # to 40 digits
        assert abs(num.mpf(p.width) / widths[p.frame] - 1) < 1e-39
    small = preview_spec(spec, chosen, tmp_path, width=100)
    assert small.size == (100, 56) and small.frames == 7 and small.color.smoothing == 0
    assert [num.decimal_text(w, 40) for w in frame_widths(small)] == [p.width for p in chosen]
    plain = specmod.parse_text(JOB.split("[[animation")[0].replace("[view]", '[view]\nwidth = ["3", "1e-3"]')
                               + "frames = 31\n", name="plain")
    assert [p.frame for p in picks(plain, count=4)] == [0, 10, 20, 30]


def test_sheet_holds_the_frames_a_render_makes(tmp_path):
    """The sheet's key-frame thumbnails are the frames `farm render` makes of the job at the
    same size (same farm, same widths, same colours), bit for bit."""
    job = tmp_path / "film.toml"
    job.write_text(JOB + f'[output]\nstore = "{tmp_path / "film.h5"}"\nvideo = "{tmp_path / "film.mp4"}"\n')
    result = run_farm("preview", str(job), "--width", "64")
    assert result.returncode == 0, result.stderr
    sheet_path = tmp_path / "film.preview.png"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["film.preview.png", "film.toml"]
    sheet = np.asarray(Image.open(sheet_path).convert("RGB"))
    size, corners = layout(7, (64, 36), 2, 4)
    assert sheet.shape == (size[1], size[0], 3)
    result = run_farm("render", str(job), "--no-video", "--quiet")
    assert result.returncode == 0, result.stderr
    frames = tmp_path / "frames"
    assert run_farm("frames", str(tmp_path / "film.h5"), "--out", str(frames)).returncode == 0
    for k, frame in [(0, 0), (2, 10), (4, 15), (6, 22)]:  # the key frames
        x, y = corners[k]
        want = np.asarray(Image.open(frames / f"frame_{frame:05d}.png").convert("RGB"))
        assert np.array_equal(sheet[y:y + 36, x:x + 64], want), k
    with Store(tmp_path / "film.h5") as store:
        assert store.frames == 23


def test_bad_preview_options_exit_2(tmp_path):
    job = tmp_path / "film.toml"
    job.write_text(JOB)
    for args, words in [(["--width", "5"], "--width"), (["--iter-cap", "0"], "--iter-cap"),
                        (["--out", str(tmp_path)], "--out")]:
        result = run_farm("preview", str(job), *args)
        assert result.returncode == 2 and words in result.stderr, result.stderr
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["film.toml"]
