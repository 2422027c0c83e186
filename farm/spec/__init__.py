"""The job spec: TOML in, a frozen :class:`JobSpec` out, and back to canonical TOML.

A spec is validated completely before anything is written. Every problem is a
:class:`~farm.errors.SpecError` whose message names the field (``view.width``)
and says what is allowed. Coordinates stay decimal strings here; they are
turned into numbers at full precision by :mod:`farm.numerics`, never through a
Python float.

The canonical text (:func:`canonical_text`) is the spec with every default
filled in, in a fixed order. The store keeps it as its ``spec`` attribute, so a
store alone says how to resume it.

This package's interface is the names below (``from farm import spec as specmod;
specmod.load(path)``); its modules, bottom to top:

- :mod:`~farm.spec.palettes`: built-in palettes and gradient files;
- :mod:`~farm.spec.keys`: the timeline's keys (``[[animation.keys]]``), angles, duration;
- :mod:`~farm.spec.sections`: the frozen :class:`JobSpec` and its sections;
- :mod:`~farm.spec.schema`: every key's parser and default (:data:`SCHEMA`), the bounds;
- :mod:`~farm.spec.derived`: the values derived from others (frames, widths);
- :mod:`~farm.spec.tiles`: a tile's bytes and the side of ``tile = "auto"``;
- :mod:`~farm.spec.parse`: a job file or text read and validated (:func:`load`);
- :mod:`~farm.spec.canonical`: the canonical text, its hash, the pixels' identity;
- :mod:`~farm.spec.checks`: warnings and whether the outputs can be written.
"""

from __future__ import annotations

import os as os  # the module the path checks use: tests patch os.access through it

from farm.errors import SpecError
from farm.spec.canonical import PIXEL_FIELDS, canonical_text, pixel_identity, spec_hash
from farm.spec.checks import check_directory, check_writable, warnings
from farm.spec.derived import complete
from farm.spec.keys import Key
from farm.spec.palettes import Gradient
from farm.spec.parse import from_dict, load, parse_text
from farm.spec.schema import (
    CODECS,
    COLOR_METHODS,
    DERIVED,
    ENCODE_PRESETS,
    ESCAPE_RADIUS_RANGE,
    MAX_ITER_LIMIT,
    MAX_PIXELS,
    MAX_SAMPLES,
    MAX_SIDE,
    METHODS,
    OMITTED_DEFAULTS,
    OPTIONAL,
    PALETTES,
    PRECISIONS,
    REQUIRED,
    RESOLVED,
    SCHEMA,
    STORE_CODECS,
    resolve_palette,
)
from farm.spec.sections import Animation, Color, Image, Iterations, JobSpec, Output, Render, View
from farm.spec.tiles import MAX_TILE_BYTES, auto_tile_side, tile_bytes

__all__ = [
    "CODECS", "COLOR_METHODS", "DERIVED", "ENCODE_PRESETS", "ESCAPE_RADIUS_RANGE", "MAX_ITER_LIMIT",
    "MAX_PIXELS", "MAX_SAMPLES", "MAX_SIDE", "MAX_TILE_BYTES", "METHODS", "OMITTED_DEFAULTS", "OPTIONAL",
    "PALETTES", "PIXEL_FIELDS", "PRECISIONS", "REQUIRED", "RESOLVED", "SCHEMA", "STORE_CODECS",
    "Animation", "Color", "Gradient", "Image", "Iterations", "JobSpec", "Key", "Output", "Render",
    "SpecError", "View", "auto_tile_side", "canonical_text", "check_directory", "check_writable",
    "complete", "from_dict", "load", "parse_text", "pixel_identity", "resolve_palette", "spec_hash",
    "tile_bytes", "warnings",
]
