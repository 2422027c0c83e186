"""The job spec: TOML in, a frozen :class:`JobSpec` out, and back to canonical TOML.

A spec is validated completely before anything is written. Every problem is a
:class:`~farm.errors.SpecError` whose message names the field (``view.width``)
and says what is allowed. Coordinates stay decimal strings here; they are
turned into numbers at full precision by :mod:`farm.numerics`, never through a
Python float.

The canonical text (:func:`canonical_text`) is the spec with every default
filled in, in a fixed order. The store keeps it as its ``spec`` attribute, so a
store alone says how to resume it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import errno
import hashlib
import json
import math
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from farm.errors import SpecError
from farm.spec.keys import Key, complete, parse_angle, parse_duration, parse_keys, parse_turn
from farm.spec.palettes import FILE_SUFFIXES, STOPS, Gradient, gradient_table, read_gradient

PALETTES = tuple(STOPS)
COLOR_METHODS = ("shade", "histogram", "smooth", "distance")
ENCODE_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow",
                  "slower", "veryslow")
CODECS = ("auto", "libx264", "h264_nvenc")
STORE_CODECS = ("zstd", "none")  # farm/store/codec.py: CODECS

PRECISIONS = ("auto", "f64", "fp128", "quad-single", "perturb")
METHODS = ("frames", "expmap")  # animation.method: every frame rendered, or exponential-map strips
MAX_ITER_LIMIT = 10_000_000  # histogram rows are max_iter+1 int64 bins
MAX_SIDE = 32768
MAX_PIXELS = 1 << 28
MAX_SAMPLES = 64  # farm/plan/samples.py
MAX_TILE_BYTES = 1 << 30  # a tile's per-pixel data, all channels (device buffers, MPI messages)
# fp128 holds 32 integer bits: |z|^2 of the step after escape must fit (see kernels/fp128.cl).
ESCAPE_RADIUS_RANGE = (2.0, 128.0)
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True)
class View:
    center: tuple[str, str]  # decimal strings: real, imaginary
    width: tuple[str, str]  # decimal strings: first and last frame, complex-plane units
    angle: float = 0.0  # degrees, counter-clockwise: the first frame's rotation (farm/spec/keys.py)


@dataclass(frozen=True)
class Image:
    size: tuple[int, int]  # (W, H) pixels
    samples: int = 1  # samples per pixel (anti-aliasing), farm/plan/samples.py


@dataclass(frozen=True)
class Animation:
    frames: int
    fps: int = 30
    # "frames": every frame rendered; "expmap": exponential-map strips plus a centre
    # image, every frame synthesised from them (farm/plan/expmap.py, farm/plan/units.py)
    method: str = "frames"
    # expmap: strip samples per output pixel at a frame's corners (angles A = oversample
    # pi hypot(W, H), rounded up to a multiple of 16)
    oversample: float = 1.0
    # waypoints of the zoom's timeline (farm/spec/keys.py, farm/plan/curve.py); () for the
    # constant zoom speed from view.width[0] to view.width[1]
    keys: tuple[Key, ...] = ()
    # degrees per second: a constant turning speed from view.angle (farm/spec/keys.py)
    turn: float = 0.0


@dataclass(frozen=True)
class Iterations:
    max: int | str = "auto"  # an int, or "auto" (rises with depth, see farm.plan.frames)
    escape_radius: float = 2.0


@dataclass(frozen=True)
class Render:
    precision: str = "auto"
    # (width, height) pixels, the unit of work and the store's chunk; "auto": the image
    # cut into equal tiles of at most 2048x2048 (farm.plan.tiles.TileGrid.auto)
    tile: tuple[int, int] | str = "auto"
    distance: bool = False  # store the distance estimate (channel "distance")


@dataclass(frozen=True)
class Color:
    method: str = "shade"  # see farm.color.methods
    # a built-in name, or a gradient: a file (.json, .txt) read when the job is loaded,
    # kept as its stops (farm/spec/palettes.py)
    palette: str | Gradient = "classic"
    cycles: float = 3.0  # palette repetitions over the equalised range
    smoothing: int = 4  # frames on each side whose CDFs are averaged (0: none)
    density: float = 1.0  # smooth: palette cycles per e-fold of the escape time
    line_width: float = 1.0  # distance: filament lines, output pixels
    light: tuple[float, float] = (135.0, 45.0)  # shade: azimuth, elevation, degrees


@dataclass(frozen=True)
class Output:
    store: str
    video: str
    crf: int = 18
    preset: str = "faster"  # x264 preset (speed against size at the same quality)
    codec: str = "auto"  # auto: h264_nvenc where it works, else libx264
    compression: str = "zstd"  # the store's pixel chunks: zstd (shuffled) or none (farm/store/codec.py)
    compression_level: int = 1  # zstd level: 1 is fast; higher levels gain a few percent
    audio: str | None = None  # a soundtrack muxed into the video as AAC (farm/encode/audio.py)


@dataclass(frozen=True)
class JobSpec:
    view: View
    image: Image
    animation: Animation
    iterations: Iterations
    render: Render
    color: Color
    output: Output

    @property
    def frames(self) -> int:
        return self.animation.frames

    @property
    def size(self) -> tuple[int, int]:
        return self.image.size


# --------------------------------------------------------------------------- field parsers
# Each parser takes (value, field) and returns the parsed value or raises SpecError.


def _decimal(value: Any, field: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str):
        hint = " (write it in quotes so no digit is lost)" if isinstance(value, float | int) else ""
        raise SpecError(field, f"must be a decimal number in a string, got {value!r}{hint}")
    text = value.strip()
    if not _DECIMAL.fullmatch(text):
        raise SpecError(field, f"{value!r} is not a decimal number (like \"-0.75\" or \"1e-20\")")
    return text


def _exact(text: str, field: str) -> Decimal:
    """A checked decimal string as an exact Decimal, for range checks. Decimal parses
    any number of digits (Fraction goes through int(), which Python limits to 4300
    digits, and a deep centre has as many digits as its depth)."""
    try:
        return Decimal(text)
    except InvalidOperation:
        raise SpecError(field, f"{text[:40]}: its exponent is out of range") from None


def _center(value: Any, field: str) -> tuple[str, str]:
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(field, "must be two decimal strings [real, imaginary]")
    parts = tuple(_decimal(v, f"{field}[{k}]") for k, v in enumerate(value))
    for k, part in enumerate(parts):
        if abs(_exact(part, f"{field}[{k}]")) > 1000:
            raise SpecError(f"{field}[{k}]", f"{part} is too far out: |coordinate| <= 1000")
    return parts  # type: ignore[return-value]


def _widths(value: Any, field: str) -> tuple[str, str]:
    if isinstance(value, str):
        value = [value, value]
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(field, "must be [first, last] as decimal strings (or one string)")
    parts = tuple(_decimal(v, f"{field}[{k}]") for k, v in enumerate(value))
    for k, part in enumerate(parts):
        w = _exact(part, f"{field}[{k}]")
        if w <= 0:
            raise SpecError(f"{field}[{k}]", f"{part} must be > 0")
        if w > 1000:
            raise SpecError(f"{field}[{k}]", f"{part} is absurdly wide: width <= 1000")
    return parts  # type: ignore[return-value]


def _int_in(lo: int, hi: int) -> Callable[[Any, str], int]:
    def parse(value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(field, f"must be an integer from {lo} to {hi}, got {value!r}")
        if not lo <= value <= hi:
            raise SpecError(field, f"{value} is out of range: {lo} to {hi}")
        return value

    return parse


def _float_in(lo: float, hi: float) -> Callable[[Any, str], float]:
    def parse(value: Any, field: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(field, f"must be a number from {lo:g} to {hi:g}, got {value!r}")
        if not lo <= value <= hi:
            raise SpecError(field, f"{value} is out of range: {lo:g} to {hi:g}")
        return float(value)

    return parse


def _pair(item: Callable[[Any, str], int], what: str) -> Callable[[Any, str], tuple[int, int]]:
    def parse(value: Any, field: str) -> tuple[int, int]:
        if not isinstance(value, list) or len(value) != 2:
            raise SpecError(field, f"must be {what}")
        return (item(value[0], f"{field}[0]"), item(value[1], f"{field}[1]"))

    return parse


def _size(value: Any, field: str) -> tuple[int, int]:
    w, h = _pair(_int_in(1, MAX_SIDE), "[width, height] in pixels")(value, field)
    if w * h > MAX_PIXELS:
        raise SpecError(field, f"{w}x{h} is {w * h} pixels; at most {MAX_PIXELS} per frame")
    return (w, h)


def _tile(value: Any, field: str) -> tuple[int, int] | str:
    if value == "auto":
        return "auto"
    if isinstance(value, str):
        raise SpecError(field, f'must be "auto" or [width, height] in pixels, got {value!r}')
    return _pair(_int_in(8, 4096), '"auto" or [width, height] in pixels')(value, field)


def _max_iter(value: Any, field: str) -> int | str:
    if value == "auto":
        return "auto"
    if isinstance(value, str):
        raise SpecError(field, f'must be "auto" or an integer, got {value!r}')
    return _int_in(1, MAX_ITER_LIMIT)(value, field)


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(field, f"must be true or false, got {value!r}")
    return value


def _samples(value: Any, field: str) -> int:
    n = _int_in(1, MAX_SAMPLES)(value, field)
    if n == 2:
        raise SpecError(field, f"2 is not allowed: two samples cannot be centred on the pixel; "
                               f"use 1, or 3 to {MAX_SAMPLES} (4, 9, 16 are typical)")
    return n


def _choice(options: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, field: str) -> str:
        if value not in options:
            allowed = " | ".join(options)
            raise SpecError(field, f"{value!r} is not one of: {allowed}")
        return str(value)

    return parse


def _palette(value: Any, field: str) -> str | Gradient:
    """A built-in name, a Gradient (read by :func:`resolve_palette`) or its table; a
    file name that was not read (a spec parsed without a job file's folder, as stores
    made before gradients were kept) stays a path, read when colouring."""
    if isinstance(value, Gradient):
        return value
    if isinstance(value, dict):
        return gradient_table(value, field)
    if isinstance(value, str) and (value in PALETTES or value.lower().endswith(FILE_SUFFIXES)):
        return value
    raise SpecError(field, f"{value!r} is not a built-in palette ({' | '.join(PALETTES)}) "
                    f"nor a gradient file ending {' or '.join(FILE_SUFFIXES)}")


def resolve_palette(value: Any, base: str | os.PathLike[str]) -> Any:
    """``color.palette`` as given, with a gradient file name (relative to the folder
    ``base``) read into a Gradient; SpecError naming ``color.palette``."""
    if isinstance(value, str) and value.lower().endswith(FILE_SUFFIXES):
        return read_gradient(Path(base) / value, "color.palette")
    return value


def _light(value: Any, field: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(field, "must be [azimuth, elevation] in degrees")
    return (_float_in(0.0, 360.0)(value[0], f"{field}[0]"), _float_in(1.0, 90.0)(value[1], f"{field}[1]"))


def _path(suffixes: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, field: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise SpecError(field, "must be a file path in a string")
        if not value.endswith(suffixes):
            raise SpecError(field, f"{value!r} must end with {' or '.join(suffixes)}")
        return value

    return parse


REQUIRED = object()
DERIVED = object()  # not required: derived from other keys (farm.spec.keys.complete)
OPTIONAL = object()  # None unless given
# Keys parsed and checked, then resolved into others (never in the canonical text).
RESOLVED = (("animation", "duration"),)
# Keys left out of the canonical text when they have their default (so that jobs
# without them keep their text and hash, and existing stores match their jobs).
OMITTED_DEFAULTS = {("animation", "keys"): (), ("output", "audio"): None,
                    ("view", "angle"): 0.0, ("animation", "turn"): 0.0,
                    ("output", "compression"): "zstd", ("output", "compression_level"): 1}


def _keys(value: Any, field: str) -> tuple[Key, ...]:
    return parse_keys(value, field, _decimal)


def _audio(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field, "must be a file path in a string (any format ffmpeg reads)")
    return value

# section -> key -> (parser, default). Order here is the canonical order.
SCHEMA: dict[str, dict[str, tuple[Callable[[Any, str], Any], Any]]] = {
    "view": {"center": (_center, REQUIRED), "width": (_widths, DERIVED), "angle": (parse_angle, 0.0)},
    "image": {"size": (_size, REQUIRED), "samples": (_samples, 1)},
    "animation": {
        "frames": (_int_in(1, 100_000), DERIVED),
        "fps": (_int_in(1, 240), 30),
        "method": (_choice(METHODS), "frames"),
        "oversample": (_float_in(0.5, 4.0), 1.0),
        "duration": (parse_duration, OPTIONAL),
        "keys": (_keys, ()),
        "turn": (parse_turn, 0.0),
    },
    "iterations": {
        "max": (_max_iter, "auto"),
        "escape_radius": (_float_in(*ESCAPE_RADIUS_RANGE), 2.0),
    },
    "render": {
        "precision": (_choice(PRECISIONS), "auto"),
        "tile": (_tile, "auto"),
        "distance": (_bool, False),
    },
    "color": {
        "method": (_choice(COLOR_METHODS), "shade"),
        "palette": (_palette, "classic"),
        "cycles": (_float_in(0.01, 1000.0), 3.0),
        "smoothing": (_int_in(0, 1000), 4),
        "density": (_float_in(0.01, 1000.0), 1.0),
        "line_width": (_float_in(0.0, 100.0), 1.0),
        "light": (_light, (135.0, 45.0)),
    },
    "output": {
        "store": (_path((".h5", ".hdf5")), None),
        "video": (_path((".mp4",)), None),
        "crf": (_int_in(0, 51), 18),
        "preset": (_choice(ENCODE_PRESETS), "faster"),
        "codec": (_choice(CODECS), "auto"),
        "compression": (_choice(STORE_CODECS), "zstd"),
        "compression_level": (_int_in(1, 19), 1),
        "audio": (_audio, OPTIONAL),
    },
}
_CLASSES = {
    "view": View, "image": Image, "animation": Animation, "iterations": Iterations,
    "render": Render, "color": Color, "output": Output,
}


def _unknown(kind: str, name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {kind}{hint} (allowed: {', '.join(known)})"


def from_dict(data: dict[str, Any], name: str = "job", source: str | None = None,
              base: str | os.PathLike[str] | None = None,
              probe: Callable[[str], float] | None = None) -> JobSpec:
    """Validate a parsed TOML document; ``name`` gives the default output paths. With
    ``base`` (the job file's folder), a gradient file named by ``color.palette`` is read
    from there into the spec. ``probe(path)``: a soundtrack's length in seconds, for
    ``duration = "audio"`` (default: ffmpeg, farm/encode/audio.py)."""
    for section in data:
        if section not in SCHEMA:
            raise SpecError(section, _unknown("section", section, list(SCHEMA)), source)
    color = data.get("color")
    if base is not None and isinstance(color, dict) and "palette" in color:
        try:
            data = {**data, "color": {**color, "palette": resolve_palette(color["palette"], base)}}
        except SpecError as err:
            raise SpecError(err.field, err.message, source) from None
    sections = {}
    resolved: dict[str, Any] = {}
    for section, fields in SCHEMA.items():
        given = data.get(section, {})
        if not isinstance(given, dict):
            raise SpecError(section, "must be a [table]", source)
        for key in given:
            if key not in fields:
                raise SpecError(f"{section}.{key}", _unknown("key", key, list(fields)), source)
        values = {}
        for key, (parse, default) in fields.items():
            field = f"{section}.{key}"
            if key in given:
                try:
                    values[key] = parse(given[key], field)
                except SpecError as err:
                    raise SpecError(err.field, err.message, source) from None
            elif default is REQUIRED:
                raise SpecError(field, "is required", source)
            elif default is DERIVED or default is OPTIONAL:
                values[key] = None
            elif default is None:  # output paths default from the job name
                ext = ".h5" if key == "store" else ".mp4"
                values[key] = f"renders/{name}{ext}"
            else:
                values[key] = default
        for s_name, key in RESOLVED:
            if s_name == section:
                resolved[key] = values.pop(key)
        sections[section] = _CLASSES[section](**values)
    given = {"frames": "frames" in data.get("animation", {}), "width": "width" in data.get("view", {}),
             **resolved}
    try:
        spec = complete(JobSpec(**sections), given, probe)
    except SpecError as err:
        raise SpecError(err.field, err.message, source) from None
    _check_tile_bytes(spec, source)
    return spec


def warnings(spec: JobSpec) -> list[str]:
    """What a valid spec probably did not mean, one line each (``farm validate`` and
    ``farm render`` print them and go on)."""
    out = []
    first, last = spec.view.width
    if spec.frames == 1 and Decimal(first) != Decimal(last):
        out.append(f"animation.frames = 1 renders view.width[0] = {first} only; view.width[1] = "
                   f"{last} is not used (frames >= 2 make a zoom; one width makes a still)")
    return out


def auto_tile_side(samples: int) -> int:
    """The longest side of a ``tile = "auto"`` tile: 2048 pixels with one sample a pixel,
    less with more samples, so that such a tile holds at most 2048^2 samples (64 MiB of
    data with the distance estimate)."""
    return max(64, int(2048 / math.sqrt(samples)))


def _tile_size(spec: JobSpec) -> tuple[int, int]:
    """The spec's tile size; for "auto", its bound (auto_tile_side)."""
    tile = spec.render.tile
    if isinstance(tile, str):
        side = auto_tile_side(spec.image.samples)
        return (side, side)
    return tile


def tile_bytes(spec: JobSpec) -> int:
    """Bytes of one full tile's per-pixel data: 8 per sample (count and offset), 8 more
    with the distance estimate (at most, for ``tile = "auto"``)."""
    tw, th = _tile_size(spec)
    w, h = spec.size
    per_sample = 16 if spec.render.distance else 8
    return min(tw, w) * min(th, h) * spec.image.samples * per_sample


def _check_tile_bytes(spec: JobSpec, source: str | None) -> None:
    size = tile_bytes(spec)
    if size > MAX_TILE_BYTES:  # never for "auto" tiles (auto_tile_side)
        tw, th = _tile_size(spec)
        raise SpecError("render.tile", f"a {tw}x{th} tile with {spec.image.samples} samples per "
                        f"pixel holds {size / 2**30:.1f} GiB; at most 1 GiB: use a smaller tile",
                        source)


def parse_text(text: str, name: str = "job", source: str | None = None,
               base: str | os.PathLike[str] | None = None,
               probe: Callable[[str], float] | None = None) -> JobSpec:
    """Parse TOML text; syntax errors name the line. ``base``, ``probe``: see
    :func:`from_dict`."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError("TOML", str(err), source) from None
    return from_dict(data, name=name, source=source, base=base, probe=probe)


def load(path: str | os.PathLike[str]) -> JobSpec:
    """Read and validate a job file; output paths default to ``renders/<stem>.*``, a
    gradient file is read from the job file's folder; ``animation.duration = "audio"``
    probes the soundtrack (ffmpeg)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is not TOML
    except FileNotFoundError:
        raise SpecError("job file", f"{p} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError("job file", f"{p} cannot be read: {err}") from None
    return parse_text(text, name=p.stem, source=str(p), base=p.parent)


# --------------------------------------------------------------------------- canonical text


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string of printable text is a TOML basic string
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table; keys are bare words (a Gradient's)
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


def canonical_text(spec: JobSpec) -> str:
    """The spec with all defaults, in schema order: stable text for the store and hashing.
    Keys in OMITTED_DEFAULTS are left out when they have their default; timeline keys
    are ``[[animation.keys]]`` tables after the ``[animation]`` section."""
    lines = []
    for section in SCHEMA:
        lines.append(f"[{section}]")
        tables = []
        for key, value in dataclasses.asdict(getattr(spec, section)).items():
            if (section, key) in OMITTED_DEFAULTS and value == OMITTED_DEFAULTS[section, key]:
                continue
            if (section, key) == ("animation", "keys"):
                tables = value
                continue
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
        for table in tables:
            lines.append(f"[[{section}.keys]]")
            lines += [f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None]
            lines.append("")
    return "\n".join(lines)


# Sections and keys that decide the stored pixels. Colour, output paths and fps may
# change between runs of the same store; these may not.
PIXEL_FIELDS = ("view", "image", "animation.frames", "animation.method", "animation.oversample",
                "iterations", "render")


def pixel_identity(spec: JobSpec) -> dict[str, Any]:
    """What must match for a store to be resumed with this spec. With timeline keys or
    a turning speed, ``animation.fps`` decides the frames' times (their widths and
    angles), so it belongs to the pixels too."""
    out: dict[str, Any] = {}
    for name in PIXEL_FIELDS:
        section, _, key = name.partition(".")
        part = dataclasses.asdict(getattr(spec, section))
        out[name] = part[key] if key else part
    keys = spec.animation.keys
    out["animation.keys"] = [dataclasses.asdict(k) for k in keys]
    out["animation.turn"] = spec.animation.turn
    out["animation.fps"] = spec.animation.fps if keys or spec.animation.turn else None
    return out


def spec_hash(spec: JobSpec) -> str:
    return hashlib.sha256(canonical_text(spec).encode()).hexdigest()[:16]


def _probe_directory(directory: Path) -> str | None:
    """Why no file can be created in ``directory`` (one phrase), or None when one can.

    Creates and at once removes a hidden empty file: os.access says yes to root on a
    read-only mount or in /proc, where creating a file still fails."""
    probe = directory / f".farm-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as err:
        return err.strerror.lower() if err.strerror else str(err)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return None


def _why_not_writable(p: Path) -> str:
    """Why the existing file ``p`` cannot be written: its file system is mounted
    read-only (EROFS), or permission is denied."""
    try:
        read_only = bool(os.statvfs(p).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return os.strerror(errno.EROFS).lower() if read_only else "permission denied"


def _existing_ancestor(p: Path, field: str, path: object) -> Path:
    """The nearest folder of ``p`` that exists (the ones below it would be created)."""
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise SpecError(field, f"cannot create {path}: {parent} is not a directory")
    return parent


def check_writable(path: str | os.PathLike[str], field: str) -> None:
    """Raise SpecError unless the file ``path`` could be created or overwritten (its
    missing folders too). Leaves nothing behind."""
    p = Path(path).absolute()
    if p.is_dir():
        raise SpecError(field, f"{path} is a directory, not a file")
    if p.exists() and not os.access(p, os.W_OK):
        raise SpecError(field, f"cannot write {path}: {_why_not_writable(p)}")
    folder = _existing_ancestor(p, field, path)
    problem = _probe_directory(folder)
    if problem:
        raise SpecError(field, f"cannot write {path}: {problem} in {folder}")


def check_directory(path: str | os.PathLike[str], field: str) -> None:
    """Raise SpecError unless files could be written into the folder ``path`` (created
    if missing). Leaves nothing behind."""
    p = Path(path).absolute()
    if p.exists() and not p.is_dir():
        raise SpecError(field, f"{path} is a file, not a directory")
    folder = p if p.is_dir() else _existing_ancestor(p, field, path)
    problem = _probe_directory(folder)
    if problem:
        raise SpecError(field, f"cannot write into {path}: {problem} in {folder}")
