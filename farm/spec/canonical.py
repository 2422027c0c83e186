"""Back to TOML: the canonical text of a spec (:func:`canonical_text`), its hash
(:func:`spec_hash`), and what must match for a store to be resumed
(:func:`pixel_identity`).

The canonical text is the spec with every default filled in, in the schema's order.
The store keeps it as its ``spec`` attribute, so a store alone says how to resume it;
it must not change for a job that has not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from farm.spec.schema import OMITTED_DEFAULTS, SCHEMA
from farm.spec.sections import JobSpec


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
