"""A job file (TOML text) and a gradient file from a :class:`~farm.film.locations.Location`.

The view, exactly: the source's centre ``(Re, Im)`` becomes ``view.center`` digit for
digit; its zoom ``Z`` (view height ``4 / Z``, see :mod:`farm.film.locations.model`) becomes
the last frame's width

    ``w = 4 W / (Z H)``  rounded to 40 significant digits (decimal arithmetic),

for an image of ``W x H`` pixels. So pixel ``(i, j)`` of the last frame is at
``re = Re + (i + 0.5 - W/2) s``, ``im = Im - (j + 0.5 - H/2) s`` with
``s = w / W = 4 / (Z H)`` (relative error below 1e-39): the source's pixel centres
(F3's ``u = i + 0.5 - W/2`` times its spacing ``4 / (Z H)``, imaginary axis up), with
the same height of view whatever the aspect ratio. (KF samples its pixel (i, j) at
``u = i - W/2``, ``v = j - H/2``: half a pixel from the farm's centres.)

The source's rotation becomes ``view.angle`` (and a KF location without
``ImagPointsUp`` the conjugate centre ``Re - Im i``), as :mod:`farm.film.locations.model`
derives from each program's pixel mapping; with it, pixel ``(i, j)`` is at
``C + s e^(i angle) (u + i v)``, ``u = i + 0.5 - W/2``, ``v = -(j + 0.5 - H/2)``.

The zoom's other keys come from :class:`JobOptions`: the first width (default 4), the
length (frames, or seconds at fps; default two octaves of zoom per second), the image
size (default the source's, else 1920x1080), the iteration limit ("auto", the
source's, or a number).
"""

from __future__ import annotations

import decimal
import json
import os
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from farm.errors import UsageError
from farm.film.locations.model import DECIMAL, Location

DEFAULT_SIZE = (1920, 1080)
WIDTH_DIGITS = 40  # significant digits of the imported width
OCTAVES_PER_SECOND = 2.0  # default zoom speed when neither frames nor seconds are given
MAX_ITER_LIMIT = 10_000_000  # farm.spec.MAX_ITER_LIMIT


@dataclass(frozen=True)
class JobOptions:
    size: tuple[int, int] | None = None  # (W, H); None: the source's, else DEFAULT_SIZE
    frames: int | None = None
    seconds: float | None = None  # the video's length, when frames is not given
    fps: int = 30
    start_width: str = "4"  # decimal string: the first frame's width
    max_iter: str = "auto"  # "auto", "source" (the file's limit) or an integer


def _context() -> decimal.Context:
    return decimal.Context(prec=WIDTH_DIGITS, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def view_width(location: Location, size: tuple[int, int]) -> str:
    """``4 W / (Z H)`` to WIDTH_DIGITS significant digits, as a decimal string."""
    assert location.zoom is not None
    w, h = size
    ctx = _context()
    width = ctx.divide(Decimal(4 * w), ctx.multiply(Decimal(location.zoom), Decimal(h)))
    return format(width.normalize(ctx), "e")


def octaves(first: str, last: str) -> float:
    """log2(first / last): the zoom's depth in octaves (negative: a zoom out)."""
    ctx = _context()
    return float(ctx.divide(ctx.ln(Decimal(first)) - ctx.ln(Decimal(last)), ctx.ln(Decimal(2))))


def frame_count(options: JobOptions, first: str, last: str) -> int:
    """The frames of the video: given, or seconds at fps, or OCTAVES_PER_SECOND."""
    if options.frames is not None:
        return options.frames
    if options.seconds is not None:
        return max(1, round(options.seconds * options.fps))
    depth = abs(octaves(first, last))
    return max(2, round(depth / OCTAVES_PER_SECOND * options.fps)) if depth > 0 else 1


def _max_iter(location: Location, choice: str) -> tuple[str, str]:
    """(TOML value, comment) of iterations.max."""
    source = f"the source's limit: {location.iterations}" if location.iterations else "none given"
    if choice == "auto":
        return '"auto"', f"rises with depth ({source})"
    if choice == "source":
        if location.iterations is None:
            raise UsageError("--max-iter source: the file gives no iteration limit")
        return str(min(location.iterations, MAX_ITER_LIMIT)), source
    try:
        value = int(choice)
    except ValueError:
        raise UsageError(f"--max-iter: {choice!r} is not auto, source or an integer") from None
    return str(value), source


def negated(text: str) -> str:
    """A decimal string with its sign changed, digit for digit ("0" stays "0")."""
    if Decimal(text) == 0:
        return text
    return text[1:] if text.startswith("-") else "-" + text.removeprefix("+")


def _orientation(location: Location) -> list[str]:
    """The job's comment lines on the source's orientation and rotation."""
    lines = []
    if location.conjugate:
        lines += [f"# {location.program} draws the imaginary axis pointing down (no ImagPointsUp): its",
                  "# picture is the view of the conjugate centre Re - Im i (the set is symmetric",
                  "# about the real axis), which this job renders."]
    if location.angle:
        lines.append(f"# The source's rotation is view.angle = {location.angle!r} degrees, "
                     "counter-clockwise.")
    return lines


def palette_text(location: Location, source: str) -> str:
    """The source's palette as a gradient file (farm/spec/palettes.py's text format):
    its colours evenly spread over one cycle, as KF spreads them."""
    lines = [f"# Palette of {source} ({location.program}): {len(location.colours)} colours, "
             "evenly spread, cyclic (written by `farm import`)"]
    lines += [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in location.colours]
    return "\n".join(lines) + "\n"


def job_text(location: Location, options: JobOptions, source: str,
             palette: str | None = None) -> str:
    """The job file for ``location``; ``palette``: the gradient file's path for
    color.palette (None: the farm's default palette)."""
    if not location.has_view:
        raise UsageError(f"{source}: a {location.program} palette without a location (Re, Im, Zoom)")
    assert location.real is not None and location.imag is not None
    size = options.size or location.size or DEFAULT_SIZE
    last = view_width(location, size)
    first = options.start_width
    check(options)
    frames = frame_count(options, first, last)
    max_iter, why = _max_iter(location, options.max_iter)
    widths = f"[{json.dumps(first)}, {json.dumps(last)}]" if frames > 1 else json.dumps(last)
    imag = negated(location.imag) if location.conjugate else location.imag
    lines = [
        f"# Imported by `farm import` from {source} ({location.program}).",
        f"# Zoom {location.zoom}: the view's height is 4/Zoom; the last frame's width is",
        f"# 4 W / (Zoom H) = {last} at {size[0]}x{size[1]} (the source's view exactly).",
        *_orientation(location),
        *(f"# not honoured: {note}" for note in location.notes),
        "",
        "[view]",
        f"center = [{json.dumps(location.real)}, {json.dumps(imag)}]",
        f"width = {widths}",
        *([f"angle = {location.angle!r}  # degrees, counter-clockwise"] if location.angle else []),
        "",
        "[image]",
        f"size = [{size[0]}, {size[1]}]",
        "",
        "[animation]",
        f"frames = {frames}  # {frames / options.fps:.1f} s; "
        f"{abs(octaves(first, last)):.1f} octaves of zoom",
        f"fps = {options.fps}",
        "",
        "[iterations]",
        f"max = {max_iter}  # {why}",
    ]
    if location.escape_radius is not None:
        lines.append(f"escape_radius = {location.escape_radius!r}")
    if palette is not None:
        lines += ["", "[color]", f"palette = {json.dumps(palette)}"]
    return "\n".join(lines) + "\n"


def check(options: JobOptions) -> None:
    """UsageError naming the option unless the options make sense."""
    if not DECIMAL.fullmatch(options.start_width) or Decimal(options.start_width) <= 0:
        raise UsageError(f"--from-width: {options.start_width!r} is not a decimal number > 0")
    if options.frames is not None and options.frames < 1:
        raise UsageError(f"--frames: {options.frames} must be at least 1")
    if options.seconds is not None and not options.seconds > 0:
        raise UsageError(f"--seconds: {options.seconds} must be > 0")
    if options.frames is not None and options.seconds is not None:
        raise UsageError("--frames and --seconds: give one of them")
    if not 1 <= options.fps <= 240:
        raise UsageError(f"--fps: {options.fps} is out of range: 1 to 240")


def _stem(source: Path) -> str:
    name = source.name
    for suffix in (".f3.toml", ".toml", ".kfr", ".kfp", ".png", ".exr"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return source.stem or "location"


def default_job_path(source: Path) -> Path:
    """``STEM.toml`` in the current folder (``STEM-farm.toml`` for an F3 ``.toml``,
    whose own name that would be)."""
    path = Path(f"{_stem(source)}.toml")
    return path.with_name(f"{_stem(source)}-farm.toml") if path.absolute() == source.absolute() else path


def palette_path(job: Path) -> Path:
    """Where a job's imported palette goes: beside it, ``STEM.palette.txt``."""
    return job.with_name(f"{job.stem}.palette.txt")


def write_file(path: Path, text: str) -> None:
    """Write ``path`` atomically (a hidden temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def import_files(location: Location, options: JobOptions, source: Path, job: Path | None,
                 force: bool = False) -> list[Path]:
    """Write the job file (default :func:`default_job_path`) and, when the source has
    a palette, its gradient file beside it; a palette alone (a KF ``.kfp``) gives just
    the gradient file (``job``, or ``STEM.palette.txt``). The job is validated as a
    spec first; nothing is written on an error, nor over an existing file unless
    ``force``. Returns the paths written."""
    from farm import spec as specmod

    if not location.has_view:
        if not location.colours:
            raise UsageError(f"{source}: neither a location nor a palette")
        target = job if job is not None else Path(f"{_stem(source)}.palette.txt")
        if not target.name.endswith(".txt"):
            raise UsageError(f"-o: {target} must end with .txt: {source} is a palette without a "
                             "location (Re, Im, Zoom), and becomes a gradient file")
        targets = {target: palette_text(location, source.name)}
    else:
        target = job if job is not None else default_job_path(source)
        if target.suffix != ".toml":
            raise UsageError(f"-o: {target} must end with .toml")
        palette = palette_path(target) if location.colours else None
        # named from the job's folder (gradient files are read from there): the job and its
        # gradient file can move together
        text = job_text(location, options, source.name, palette.name if palette is not None else None)
        specmod.parse_text(text, name=target.stem, source=str(target))  # a valid job, or exit 2
        targets = {target: text}
        if palette is not None:
            targets[palette] = palette_text(location, source.name)
    for path in targets:
        if path.exists() and not force:
            raise UsageError(f"{path} exists; use --force to replace it, or -o to choose another name")
        specmod.check_writable(path, "-o")
    for path, text in targets.items():
        write_file(path, text)
    return list(targets)
