"""Colour and output settings for recolouring a store: the stored job's, overridden.

``farm encode`` and ``farm frames`` start from the spec stored in the store, then
apply a job file's ``[color]`` and ``[output]`` sections (and ``animation.fps``), then
single options. Every value is validated by the spec's own parsers, so an override
fails exactly like the same key in a job file (``farm: color.cycles: ...``).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from farm import spec as specmod
from farm.errors import SpecError, UsageError

JOB_SECTIONS = ("color", "output")


def _job_overrides(path: str) -> dict[str, dict[str, Any]]:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise SpecError("--job", f"{p} does not exist") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError("--job", f"{p} cannot be read: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError("TOML", str(err), str(p)) from None
    out = {s: dict(data[s]) for s in JOB_SECTIONS if isinstance(data.get(s), dict)}
    animation = data.get("animation")
    if isinstance(animation, dict) and "fps" in animation:
        out["animation"] = {"fps": animation["fps"]}
    return out


def names_video(job: str | None) -> bool:
    """Whether the ``--job`` file ``job`` sets ``output.video`` (then it is the target)."""
    return bool(job) and "video" in _job_overrides(job).get("output", {})  # type: ignore[arg-type]


def with_overrides(spec: specmod.JobSpec, job: str | None = None,
                   options: dict[str, dict[str, Any]] | None = None) -> specmod.JobSpec:
    """``spec`` with ``job``'s colour/output sections, then ``options``
    (``{"color": {"palette": "fire"}, ...}``, None values ignored), validated."""
    data = tomllib.loads(specmod.canonical_text(spec))
    # a gradient file: --job's relative to its folder, an option's to the current one
    layers: list[tuple[dict[str, dict[str, Any]], Path, str | None]] = []
    if job:
        layers.append((_job_overrides(job), Path(job).parent, job))
    layers.append((options or {}, Path(), None))
    for layer, base, source in layers:
        for section, values in layer.items():
            given = {k: v for k, v in values.items() if v is not None}
            if section == "color" and "palette" in given:
                try:
                    given["palette"] = specmod.resolve_palette(given["palette"], base)
                except SpecError as err:
                    raise SpecError(err.field, err.message, source) from None
            data.setdefault(section, {}).update(given)
    return specmod.from_dict(data, source=job)


def frame_range(text: str | None, frames: int) -> list[int] | None:
    """``--frames``: ``A:B`` (frames A..B-1, either end may be left out) or ``N``;
    None (every frame) when not given."""
    if text is None:
        return None
    try:
        if ":" in text:
            a, _, b = text.partition(":")
            lo = int(a) if a.strip() else 0
            hi = int(b) if b.strip() else frames
        else:
            lo = int(text)
            hi = lo + 1
    except ValueError:
        raise UsageError(f"--frames: {text!r} is not A:B or N (frame numbers)") from None
    if lo >= hi:
        raise UsageError(f"--frames: {text} is an empty range: A:B means frames A to B-1, "
                         f"so B must be above A (the store has frames 0..{frames - 1})")
    if not 0 <= lo < hi <= frames:
        raise UsageError(f"--frames: {text} is outside the store's frames 0..{frames - 1} "
                         "(A:B means frames A to B-1)")
    return list(range(lo, hi))


def light(text: str | None) -> list[float] | None:
    """``--light AZ,EL`` as the spec's ``[azimuth, elevation]``."""
    if text is None:
        return None
    try:
        az, el = (float(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"--light: {text!r} is not AZ,EL (two numbers, degrees)") from None
    return [az, el]
