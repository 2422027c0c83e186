"""TOML in, a frozen :class:`~farm.spec.sections.JobSpec` out: a job file read
(:func:`load`), its text parsed (:func:`parse_text`) and its document validated
against the schema (:func:`from_dict`), its derived values filled in.

A spec is validated completely before anything is written; every problem is a
:class:`~farm.errors.SpecError` naming the field, and the job file when there is one.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from farm.errors import SpecError
from farm.spec.derived import complete
from farm.spec.schema import DERIVED, OPTIONAL, REQUIRED, RESOLVED, SCHEMA, resolve_palette
from farm.spec.sections import SECTION_CLASSES, JobSpec
from farm.spec.tiles import check_tile_bytes


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
    ``duration = "audio"`` (default: ffmpeg, farm/runtime/media.py)."""
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
        sections[section] = SECTION_CLASSES[section](**values)
    given = {"frames": "frames" in data.get("animation", {}), "width": "width" in data.get("view", {}),
             **resolved}
    try:
        spec = complete(JobSpec(**sections), given, probe)
    except SpecError as err:
        raise SpecError(err.field, err.message, source) from None
    check_tile_bytes(spec, source)
    return spec


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
