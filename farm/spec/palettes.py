"""Cyclic palettes: built-in colour stops or a gradient file, expanded into lookup tables.

A palette is a list of ``(position, (r, g, b))`` stops, positions increasing in
[0, 1), colours 0..255. It is cyclic: past the last stop the colour runs on to the
first stop's colour at position 1, so ``t * cycles mod 1`` wraps without a seam.

Gradient files (``color.palette = "my.json"`` or ``"my.txt"``; in a job file a
relative path is relative to the job file's folder, on the command line to the current
directory). The file is read when the job is loaded and its stops are kept in the spec
as a :class:`Gradient` (canonical TOML ``palette = {name = "my", stops = [[0.0, [r, g,
b]], ...]}``), so a store recolours from any directory, the file gone or changed. The
same table may be written in a job file.

- text: one stop a line, ``[position] colour``, the colour ``#rrggbb`` or three
  integers ``r g b``; without positions the colours are spread evenly (stop k of n
  at k/n). ``#`` followed by a space starts a comment; blank lines are skipped.
- JSON: ``{"stops": [[position, colour], ...]}`` or ``{"colors": [colour, ...]}``
  (evenly spread), or just the list of colours; a colour is ``"#rrggbb"`` or
  ``[r, g, b]``.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from farm.errors import SpecError

LUT_SIZE = 4096
FIELD = "color.palette"
FILE_SUFFIXES = (".json", ".txt")

Stops = list[tuple[float, tuple[int, int, int]]]

STOPS: dict[str, Stops] = {
    # deep blue -> white -> gold -> dark brown -> deep blue
    "classic": [(0.0, (0, 7, 100)), (0.16, (32, 107, 203)), (0.42, (237, 255, 255)),
                (0.6425, (255, 170, 0)), (0.8575, (0, 2, 0)), (1.0, (0, 7, 100))],
    "fire": [(0.0, (20, 0, 0)), (0.3, (180, 20, 0)), (0.55, (255, 160, 0)),
             (0.75, (255, 255, 200)), (1.0, (20, 0, 0))],
    "ice": [(0.0, (0, 10, 30)), (0.35, (0, 90, 160)), (0.6, (180, 240, 255)),
            (0.8, (60, 120, 200)), (1.0, (0, 10, 30))],
    "gray": [(0.0, (0, 0, 0)), (0.5, (255, 255, 255)), (1.0, (0, 0, 0))],
}

@dataclass(frozen=True)
class Gradient:
    """A gradient's stops, read from a file or written inline: ``name`` (the file's
    stem; names recoloured videos, farm/encode/record.py) and ``stops``, positions
    increasing in [0, 1] ending at 1, colours 0..255 (:func:`_check`'d)."""

    name: str
    stops: tuple[tuple[float, tuple[int, int, int]], ...]


_HEX = re.compile(r"#([0-9a-fA-F]{6})")
_COMMENT = re.compile(r"(^|\s)#(\s.*)?$")


def is_file_name(name: str) -> bool:
    return name.lower().endswith(FILE_SUFFIXES)


def _colour(value: Any, where: str) -> tuple[int, int, int]:
    if isinstance(value, str) and _HEX.fullmatch(value.strip()):
        h = value.strip()[1:]
        return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)
    if (isinstance(value, list | tuple) and len(value) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255 for v in value)):
        return int(value[0]), int(value[1]), int(value[2])
    raise ValueError(f"{where}: {value!r} is not a colour (#rrggbb or [r, g, b], 0..255)")


def _spread(colours: list[tuple[int, int, int]]) -> Stops:
    return [(k / len(colours), c) for k, c in enumerate(colours)]


def _check(stops: Stops) -> Stops:
    """Positions increasing in [0, 1]; the cycle closes at 1 with the first colour."""
    if not stops:
        raise ValueError("no colour stops")
    pos = [p for p, _ in stops]
    if any(not 0.0 <= p <= 1.0 for p in pos) or any(b <= a for a, b in zip(pos, pos[1:], strict=False)):
        raise ValueError(f"positions must increase within 0..1, got {pos}")
    if pos[-1] < 1.0:
        stops = [*stops, (1.0, stops[0][1])]
    return stops


def parse_text(text: str) -> Stops:
    stops: list[tuple[float | None, tuple[int, int, int]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", line).strip()
        if not line:
            continue
        parts = line.replace(",", " ").split()
        where = f"line {number}"
        try:
            if len(parts) in (1, 3):
                stops.append((None, _colour(parts[0] if len(parts) == 1 else [int(v) for v in parts], where)))
            elif len(parts) in (2, 4):
                rest = parts[1] if len(parts) == 2 else [int(v) for v in parts[1:]]
                stops.append((float(parts[0]), _colour(rest, where)))
            else:
                raise ValueError
        except ValueError as err:
            raise ValueError(str(err) if str(err) else f"{where}: {line!r} is not "
                             "'[position] #rrggbb' or '[position] r g b'") from None
    if any(p is None for p, _ in stops) and any(p is not None for p, _ in stops):
        raise ValueError("give a position on every line or on none")
    if stops and stops[0][0] is None:
        return _spread([c for _, c in stops])
    return [(float(p), c) for p, c in stops]  # type: ignore[arg-type]


def parse_json(text: str) -> Stops:
    data = json.loads(text)
    if isinstance(data, dict) and "stops" in data:
        return _stop_list(data["stops"], "stops")
    colours = data.get("colors") if isinstance(data, dict) else data
    if not isinstance(colours, list):
        raise ValueError('expected {"stops": [...]}, {"colors": [...]} or a list of colours')
    return _spread([_colour(c, f"colors[{k}]") for k, c in enumerate(colours)])


def _stop_list(items: Any, where: str) -> Stops:
    """``[[position, colour], ...]`` (JSON's ``stops``, a Gradient's TOML table)."""
    if not isinstance(items, list | tuple):
        raise ValueError(f"{where}: must be a list of [position, colour]")
    out = []
    for k, item in enumerate(items):
        if not isinstance(item, list | tuple) or len(item) != 2 or isinstance(item[0], bool) \
                or not isinstance(item[0], int | float):
            raise ValueError(f"{where}[{k}]: must be [position, colour]")
        out.append((float(item[0]), _colour(item[1], f"{where}[{k}]")))
    return out


def read_gradient(path: str | os.PathLike[str], field: str = FIELD) -> Gradient:
    """The gradient file ``path`` (.json or .txt) as a :class:`Gradient`; SpecError
    naming ``field`` when it is missing or malformed."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as err:
        raise SpecError(field, f"cannot read {name}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise SpecError(field, f"{name}: not UTF-8 text ({err.reason})") from None
    try:
        parsed = parse_json(text) if name.lower().endswith(".json") else parse_text(text)
        return Gradient(Path(name).stem, tuple(_check(parsed)))
    except (ValueError, json.JSONDecodeError) as err:
        raise SpecError(field, f"{name}: {err}") from None


def gradient_table(value: Any, field: str = FIELD) -> Gradient:
    """A Gradient from its TOML table ``{name = "...", stops = [[position, colour], ...]}``
    (how the canonical spec keeps a gradient file); SpecError naming ``field``."""
    if set(value) != {"name", "stops"} or not isinstance(value["name"], str):
        raise SpecError(field, "a gradient table has two keys: name (a string) and stops "
                        "([[position, colour], ...])")
    try:
        return Gradient(value["name"], tuple(_check(_stop_list(value["stops"], "stops"))))
    except ValueError as err:
        raise SpecError(field, str(err)) from None


def stops(palette: str | Gradient) -> Stops:
    """The stops of a built-in palette, a Gradient, or a gradient file (relative to the
    current directory); SpecError naming ``color.palette`` when the file is missing or
    malformed."""
    if isinstance(palette, Gradient):
        return list(palette.stops)
    if palette in STOPS:
        return STOPS[palette]
    if not is_file_name(palette):
        raise SpecError(FIELD, f"{palette!r} is not a built-in palette ({', '.join(STOPS)}) "
                        f"nor a gradient file ({' or '.join(FILE_SUFFIXES)})")
    return list(read_gradient(palette).stops)


def _table(stop_list: Stops) -> np.ndarray:
    pos = np.array([p for p, _ in stop_list])
    rgb = np.array([c for _, c in stop_list], dtype=np.float64)
    x = (np.arange(LUT_SIZE) + 0.5) / LUT_SIZE
    return np.stack([np.interp(x, pos, rgb[:, k]) for k in range(3)], axis=1)


@functools.lru_cache(maxsize=16)
def _lut(palette: str | Gradient, stamp: float) -> np.ndarray:
    out = np.rint(_table(stops(palette))).astype(np.uint8)
    out.setflags(write=False)
    return out


def _stamp(palette: str | Gradient) -> float:
    """A gradient file's modification time (a changed file is read again)."""
    if isinstance(palette, Gradient) or palette in STOPS:
        return 0.0
    try:
        return Path(palette).stat().st_mtime
    except OSError:
        return -1.0


def lut(palette: str | Gradient) -> np.ndarray:
    """``(LUT_SIZE, 3)`` uint8 colours, linearly interpolated between stops; entry k is
    the colour at palette position ``(k + 0.5) / LUT_SIZE``. ``palette``: a built-in
    name, a Gradient, or a gradient file's path."""
    return _lut(palette, _stamp(palette))
