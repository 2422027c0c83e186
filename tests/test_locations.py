"""`farm import`: locations from Kalles Fraktaler and Fraktaler-3 files (and the PNG and EXR
images they save) into jobs that show the source's view.

The test files are written here from the formats' documentation: KF's "Key: value"
lines (Re, Im, Zoom with half height 2/Zoom, Colors as B,G,R triplets), F3's TOML
(location.real/imag/zoom, zoom 1 showing the imaginary axis from -2 to +2, i.e. pixel
spacing 4 / (zoom H)), PNG text chunks (keyword Comment) and EXR string attributes
(KallesFraktaler2+, Fraktaler3).
"""

from __future__ import annotations

import struct
import zlib
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import run_farm
from reference import turned_sample_c

from farm import spec as specmod
from farm.encode.outputs import png_bytes
from farm.film import locations
from farm.film.locations.job import JobOptions, job_text, view_width
from farm.plan import make_plan
from farm.spec import palettes

RE = "-0.743643887037158704752191506114774"
IM = "0.131825904205311970493132056385139"
KFR = "\r\n".join([
    f"Re: {RE}", f"Im: {IM}", "Zoom: 2.5E12", "Iterations: 12000", "IterDiv: 0.010000",
    "ColorMethod: 7", "Rotate: 0.000000", "Ratio: 360.000000",
    "Colors: 255,255,255,128,0,64,160,0,0,192,128,0,",  # B,G,R: white, purple, dark blue, ...
    "InteriorColor: 0,0,0,", "Power: 2", "FractalType: 0", "Slopes: 1", "real: 1", "imag: 1",
    "SeedR: 0", "SeedI: 0", "FactorAR: 1", "FactorAI: 0", "Period: 0", ""])
F3 = f'''program = "fraktaler-3"
version = "3-0.4"
location.real = """
{RE[:20]}\\
  {RE[20:]}"""
location.imag = "{IM}"
location.zoom = "1.5e20"
bailout.iterations = 50000
bailout.maximum_perturb_iterations = 4096
image.width = 1280
image.height = 720
transform.rotate = 12.5
[[formula]]
power = 2
'''


ROOT = Path(__file__).resolve().parents[1]


def farm_in(folder: Path, *args: str):
    """``python -m farm ARGS`` run in ``folder`` (this checkout's farm)."""
    return run_farm(*args, cwd=folder, env={"PYTHONPATH": str(ROOT)})


def source_pixel(program, re: str, im: str, zoom: str, size, i: int, j: int, rotate: float = 0.0,
                 up: bool = True) -> tuple[Fraction, Fraction]:
    """The point the source program puts at its pixel (i, j) (its pixel centre, as the
    farm's, to 60 digits): view height 4/Zoom, square pixels, and each program's own
    transform, as its sources compute it. F3 (src/hybrid.cc, src/matrix.h): c = C + s K
    (u, v), K row-major (cos r, -sin r, sin r, cos r), v = j + 1/2 - H/2 with rows
    counted from the bottom (F3 flips its images on saving: v up). KF
    (GetPixelCoordinates, common/matrix.cpp polar_composition, glm's column-major
    mat2): M = R G, R = mat2(cos r, -sin r, sin r, cos r), G = mat2(1, 0, 0, sign),
    sign -1 with ImagPointsUp (``up``) and 1 without; x = M[0][0] u + M[0][1] v, y =
    M[1][0] u + M[1][1] v with v = j + 1/2 - H/2, rows counted from the top."""
    import mpmath

    def glm(a, b, c, d):  # glm's mat2(a, b, c, d): columns (a, b) and (c, d); m[col][row]
        return [[a, b], [c, d]]

    def product(a, b):  # glm's a * b (the matrix product, column-major storage)
        return [[sum(a[k][row] * b[col][k] for k in range(2)) for row in range(2)] for col in range(2)]

    w, h = size
    with mpmath.workdps(60):
        s = mpmath.mpf(4) / (mpmath.mpf(zoom) * h)
        r = mpmath.radians(mpmath.mpf(repr(float(rotate))))
        c, n = mpmath.cos(r), mpmath.sin(r)
        u, v = mpmath.mpf(2 * i + 1 - w) / 2, mpmath.mpf(2 * j + 1 - h) / 2
        if program == locations.F3:
            v = -v  # the saved image's row j is F3's row h - 1 - j
            x, y = c * u - n * v, n * u + c * v
        else:
            m = product(glm(c, -n, n, c), glm(1, 0, 0, -1 if up else 1))
            x, y = m[0][0] * u + m[0][1] * v, m[1][0] * u + m[1][1] * v
        return exact(mpmath.mpf(re) + s * x), exact(mpmath.mpf(im) + s * y)


def exact(x) -> Fraction:
    """An mpmath mpf as the Fraction it is."""
    sign, man, exp, _ = x._mpf_
    return (-1) ** sign * Fraction(man) * Fraction(2) ** exp


def assert_pixels_match(spec, program, re, im, zoom, rotate=0.0, up=True, conjugate=False):
    """The spec's last frame maps pixels (the README's contract, turned by view.angle:
    tests/reference.py's independent mapping) onto the source program's pixel centres
    (their conjugates with ``conjugate``: the same escape times), to far below a pixel."""
    w, h = spec.size
    s_source = Fraction(4) / (Fraction(zoom) * h)
    for i, j in [(0, 0), (w - 1, h - 1), (w // 2, h // 3), (7, h - 2)]:
        got_re, got_im = turned_sample_c(spec.view.center, spec.view.width[1], (w, h), spec.view.angle,
                                         i, j, digits=60)
        want_re, want_im = source_pixel(program, re, im, zoom, (w, h), i, j, rotate, up)
        if conjugate:
            want_im = -want_im
        assert abs(got_re - want_re) < s_source * Fraction(1, 10**30), (i, j)
        assert abs(got_im - want_im) < s_source * Fraction(1, 10**30), (i, j)


def test_kfr_imports_the_view_exactly(tmp_path):
    (tmp_path / "seahorse.kfr").write_text(KFR)
    loc = locations.read(tmp_path / "seahorse.kfr")
    assert (loc.program, loc.real, loc.imag) == (locations.KF, RE, IM)
    assert (loc.zoom, loc.iterations) == ("2.5E12", 12000)
    assert loc.colours == ((255, 255, 255), (64, 0, 128), (0, 0, 160), (0, 128, 192))  # B,G,R -> RGB
    for size in ((640, 360), (300, 300), (101, 57)):
        spec = specmod.parse_text(job_text(loc, JobOptions(size=size, frames=20), "x"), name="x")
        # no ImagPointsUp: KF's imaginary axis points down, and its picture is the view of
        # the conjugate centre
        assert spec.view.center == (RE, "-" + IM) and spec.size == size and spec.frames == 20
        assert spec.view.width[0] == "4" and spec.view.angle == 0
        want = Fraction(4 * size[0]) / (Fraction("2.5e12") * size[1])
        assert abs(Fraction(spec.view.width[1]) / want - 1) < Fraction(1, 10**39)
        assert_pixels_match(spec, locations.KF, RE, IM, "2.5E12", up=False, conjugate=True)


@pytest.mark.parametrize("up", [True, False])
@pytest.mark.parametrize("rotate", ["30", "-117.25", "90"])
def test_kfr_rotation_imports_as_kf_draws_it(rotate, up):
    """RotateAngle with and without ImagPointsUp: the job's pixels are KF's (or, with
    KF's imaginary axis down, their conjugates: KF's picture)."""
    text = KFR.replace("Rotate: 0.000000", f"RotateAngle: {rotate}") + ("ImagPointsUp: 1\r\n" if up else "")
    loc = locations.kf.parse(text)
    assert loc.angle == -float(rotate) and loc.conjugate == (not up)
    assert not any(n.startswith(("RotateAngle", "ImagPointsUp")) for n in loc.notes), loc.notes
    spec = specmod.parse_text(job_text(loc, JobOptions(size=(64, 36), frames=2), "x"), name="x")
    assert spec.view.angle == -float(rotate) and make_plan(spec).frames[-1].rotated
    assert_pixels_match(spec, locations.KF, RE, IM, "2.5E12", float(rotate), up, conjugate=not up)


def test_kfr_notes_what_the_farm_cannot_honour():
    text = KFR.replace("Power: 2", "Power: 3").replace("Rotate: 0.000000", "Rotate: 30") \
        .replace("Ratio: 360.000000", "Ratio: 400.000000") + "StretchAmount: 10\r\nUseHybridFormula: 1\r\n"
    notes = locations.kf.parse(text).notes
    for key in ("Power: 3", "Rotate: 30", "Ratio: 400", "StretchAmount: 10", "UseHybridFormula: 1"):
        assert sum(n.startswith(key) for n in notes) == 1, (key, notes)
    assert locations.kf.parse(text).angle == 0  # KF ignores the old Rotate since 2.15.1
    assert any("IterDiv, ColorMethod" in n for n in notes)  # colouring: one line
    assert any(n.endswith("Period") for n in notes)  # the rest: one line
    assert not any(n.startswith(("FractalType", "SeedR", "real", "imag")) for n in notes)  # defaults


def test_f3_toml_imports_the_view_exactly(tmp_path):
    path = tmp_path / "deep.f3.toml"
    path.write_text(F3)
    loc = locations.read(path)
    assert (loc.program, loc.real, loc.imag) == (locations.F3, RE, IM)
    assert (loc.zoom, loc.size) == ("1.5e20", (1280, 720))
    assert loc.iterations == 50000 and loc.escape_radius is None  # F3's default 625 is out of range
    # the file leaves the escape radius at F3's default: nothing to say of it (issue 44.9)
    assert [n.split(":")[0].split(" =")[0] for n in loc.notes] == [
        "ignored (no effect on the farm's picture)"]
    radius = locations.f3.parse(F3.replace("bailout.iterations",
                                           "bailout.escape_radius = 625\nbailout.iterations"))
    assert [n.split(":")[0].split(" =")[0] for n in radius.notes] == [
        "bailout.escape_radius", "ignored (no effect on the farm's picture)"]
    assert loc.angle == 12.5 and not loc.conjugate  # F3: the imaginary axis up, rotate counter-clockwise
    spec = specmod.parse_text(job_text(loc, JobOptions(frames=3), "deep.f3.toml"), name="deep")
    assert spec.size == (1280, 720) and spec.view.center == (RE, IM) and spec.view.angle == 12.5
    assert_pixels_match(spec, locations.F3, RE, IM, "1.5e20", 12.5)
    other = F3.replace("power = 2", "power = 3")
    assert locations.f3.parse(other).notes[0].startswith("formula:")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png(*texts: bytes) -> bytes:
    """A 4x3 PNG (farm.encode.outputs.png_bytes) with text chunks after the image data."""
    import numpy as np

    parts = b"".join(bytes(p) for p in png_bytes(np.zeros((3, 4, 3), np.uint8)))
    iend = parts.rindex(b"IEND") - 4
    return parts[:iend] + b"".join(texts) + parts[iend:]


@pytest.mark.parametrize("chunk", [
    _chunk(b"tEXt", b"Comment\0" + KFR.encode()),
    _chunk(b"zTXt", b"comment\0\0" + zlib.compress(KFR.encode())),  # lower-cased by image tools
    _chunk(b"iTXt", b"Comment\0\1\0en\0\0" + zlib.compress(F3.encode())),
])
def test_png_comment_holds_the_location(tmp_path, chunk):
    path = tmp_path / "shot.png"
    path.write_bytes(_png(_chunk(b"tEXt", b"Software\0something"), chunk))
    assert locations.kind_of(path) == "png"
    loc = locations.read(path)
    assert (loc.real, loc.imag) == (RE, IM) and loc.zoom in ("2.5E12", "1.5e20")


def test_exr_header_holds_the_location(tmp_path):
    import numpy as np
    import OpenEXR

    def write(name, header):
        path = tmp_path / name
        channels = {"N": np.zeros((2, 2), np.uint32)}
        with OpenEXR.File({"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage,
                           **header}, channels) as f:
            f.write(str(path))
        return path

    kf_only = write("kf.exr", {"KallesFraktaler2+": KFR, "Iterations": 12000})
    assert locations.read(kf_only).program == locations.KF
    both = write("f3.exr", {"KallesFraktaler2+": KFR, "Fraktaler3": F3})
    assert locations.read(both).program == locations.F3  # F3's own text wins
    none = write("plain.exr", {"comment": "hello"})
    with pytest.raises(locations.NotALocation, match="no Fraktaler3 or KallesFraktaler2"):
        locations.read(none)


def test_import_writes_job_and_palette(tmp_path):
    (tmp_path / "seahorse.kfr").write_text(KFR)
    result = farm_in(tmp_path, "import", "seahorse.kfr", "--size", "320x180", "--seconds", "4")
    assert result.returncode == 0, result.stderr
    job = specmod.load(tmp_path / "seahorse.toml")
    assert job.frames == 120 and job.size == (320, 180) and job.iterations.max == "auto"
    assert (tmp_path / "seahorse.palette.txt").is_file()  # the job keeps the gradient itself
    assert job.color.palette.name == "seahorse.palette"
    assert palettes.stops(job.color.palette)[:4] == [
        (0.0, (255, 255, 255)), (0.25, (64, 0, 128)), (0.5, (0, 0, 160)), (0.75, (0, 128, 192))]
    again = farm_in(tmp_path, "import", "seahorse.kfr")
    assert again.returncode == 2 and "exists; use --force" in again.stderr
    src = farm_in(tmp_path, "import", "seahorse.kfr", "-o", "s2.toml", "--max-iter", "source")
    assert src.returncode == 0 and specmod.load(tmp_path / "s2.toml").iterations.max == 12000
    # the job names its gradient file from its own folder: the two move together
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for name in ("seahorse.toml", "seahorse.palette.txt"):
        (tmp_path / name).rename(moved / name)
    again = specmod.load(moved / "seahorse.toml")
    assert again.color.palette.stops == job.color.palette.stops
    assert str(tmp_path) not in (moved / "seahorse.toml").read_text()


def test_kfp_palette_alone_becomes_a_gradient_file(tmp_path):
    (tmp_path / "warm.kfp").write_text("Colors: 0,0,255,0,255,255,\r\nSmooth: 1\r\n")
    result = farm_in(tmp_path, "import", "warm.kfp")
    assert result.returncode == 0, result.stderr
    assert palettes.stops(str(tmp_path / "warm.palette.txt")) == [
        (0.0, (255, 0, 0)), (0.5, (255, 255, 0)), (1.0, (255, 0, 0))]
    result = farm_in(tmp_path, "render", "warm.kfp")
    assert result.returncode == 2 and "palette without a location" in result.stderr


@pytest.mark.parametrize("content", [b"hello: world\n", b'{"re": 1}', b"[view]\nx = 1\n",
                                     _png(), b"\x76\x2f\x31\x01\x02\0\0\0\0",
                                     b"Re: 1\nIm: 0\nZoom: -3\n"])
def test_not_a_location_is_one_line_exit_2(tmp_path, content):
    (tmp_path / "odd.kfr").write_bytes(content)
    result = farm_in(tmp_path, "import", "odd.kfr")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "odd.kfr" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["odd.kfr"]


def test_render_and_validate_take_a_location(tmp_path, write_job):
    (tmp_path / "shallow.kfr").write_text(KFR.replace("2.5E12", "40"))
    result = farm_in(tmp_path, "validate", "shallow.kfr", "--frames", "3", "--size", "48x27")
    assert result.returncode == 0, result.stderr
    assert "frames     3" in result.stdout and "48x27" in result.stdout
    result = farm_in(tmp_path, "render", "shallow.kfr", "--frames", "2", "--size", "32x18", "--no-video",
                      "--quiet", "--store", str(tmp_path / "s.h5"))
    assert result.returncode == 0, result.stderr
    from farm.store.reader import Store

    with Store(tmp_path / "s.h5") as store:
        assert store.frames == 2 and store.frame_done().all()
        assert store.spec.view.width[1] == view_width(locations.read(tmp_path / "shallow.kfr"), (32, 18))
        assert store.spec.color.palette.name == "shallow.palette"  # stored with the job
        gradient = palettes.read_gradient(tmp_path / "shallow.palette.txt")
        assert store.spec.color.palette.stops == gradient.stops
    job = write_job(size=(16, 16))
    result = run_farm("render", str(job), "--frames", "3")
    assert result.returncode == 2 and "--frames: only for a location file" in result.stderr


def test_kf_image_size_is_the_jobs_size(tmp_path):
    """KF's ImageWidth and ImageHeight are the job's size (the view exactly as KF showed
    it), unless --size is given (issue 44.9)."""
    sized = KFR.replace("Iterations: 12000", "Iterations: 12000\r\nImageWidth: 1280\r\nImageHeight: 720")
    loc = locations.kf.parse(sized)
    assert loc.size == (1280, 720)
    assert not any("ImageWidth" in n for n in loc.notes)
    spec = specmod.parse_text(job_text(loc, JobOptions(frames=3), "x.kfr"), name="x")
    assert spec.size == (1280, 720)
    assert_pixels_match(spec, locations.KF, RE, IM, "2.5E12", up=False, conjugate=True)
    given = specmod.parse_text(job_text(loc, JobOptions(size=(320, 180), frames=3), "x.kfr"), name="x")
    assert given.size == (320, 180)
    odd = locations.kf.parse(sized.replace("ImageWidth: 1280", "ImageWidth: wide"))
    assert odd.size is None and any(n.startswith("ImageWidth, ImageHeight") for n in odd.notes)
