"""Locations from interactive explorers: Kalles Fraktaler 2+ and Fraktaler-3.

A front end that turns a location file into a job spec (TOML text) and knows nothing
of rendering: :func:`read` recognises the file by its content, :mod:`farm.film.locations.job`
writes the job. Recognised:

* a KF parameter file (``.kfr`` location, ``.kfp`` palette): ``Key: value`` lines,
  :mod:`farm.film.locations.kf`;
* an F3 parameter file (``.f3.toml``, ``.toml``): TOML with a ``[location]`` table,
  :mod:`farm.film.locations.f3`;
* a PNG whose ``Comment`` text chunk holds either, as KF and F3 save them;
* an OpenEXR file whose header holds F3's TOML (attribute ``Fraktaler3``) or KF's text
  (attribute ``KallesFraktaler2+``), as KF and F3 save them (the F3 text wins when
  both are there).

Anything else is :class:`NotALocation` (a :class:`~farm.errors.UsageError`: one line,
exit 2).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from farm.errors import UsageError
from farm.film.locations import containers, f3, kf
from farm.film.locations.model import F3, KF, Location
from farm.film.locations.model import Invalid as _Invalid

__all__ = ["F3", "KF", "Location", "NotALocation", "kind_of", "read"]


class NotALocation(UsageError):
    """A file that is not a KF or F3 location: one line naming the file."""


def _text_kind(text: str) -> str | None:
    if kf.looks_like(text):
        return "kf"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    return "f3" if f3.looks_like(data) else None


def kind_of(path: str | os.PathLike[str]) -> str | None:
    """"png", "exr", "kf" or "f3" when ``path`` may hold a location (by its first bytes
    and, for text, its content), None otherwise (a farm job file, or neither)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if head == containers.PNG_SIGNATURE:
                return "png"
            if head[:4] == containers.EXR_MAGIC:
                return "exr"
            text = (head + fh.read()).decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    return _text_kind(text)


def _from_text(text: str, where: str) -> Location:
    kind = _text_kind(text)
    if kind is None:
        raise _Invalid(f"{where} holds neither Kalles Fraktaler nor Fraktaler-3 parameters")
    return kf.parse(text) if kind == "kf" else f3.parse(text)


def _read(path: Path) -> Location:
    with open(path, "rb") as fh:
        head = fh.read(8)
        fh.seek(0)
        if head == containers.PNG_SIGNATURE:
            comment = containers.png_comment(fh)
            if comment is None:
                raise _Invalid("the PNG has no Comment text (KF and F3 keep their parameters there)")
            return _from_text(comment, "its Comment text")
        if head[:4] == containers.EXR_MAGIC:
            strings = containers.exr_strings(fh)
            for name in ("Fraktaler3", "KallesFraktaler2+"):
                if name in strings:
                    return _from_text(strings[name], f"its {name} attribute")
            raise _Invalid("the OpenEXR header has no Fraktaler3 or KallesFraktaler2+ attribute")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise _Invalid("it is neither text nor a PNG or OpenEXR image") from None
    return _from_text(text, "it")


def read(path: str | os.PathLike[str]) -> Location:
    """The location (or palette) in ``path``; NotALocation (one line naming the file)
    when it holds none."""
    p = Path(path)
    try:
        return _read(p)
    except FileNotFoundError:
        raise NotALocation(f"{p} does not exist") from None
    except OSError as err:
        raise NotALocation(f"{p} cannot be read: {err.strerror or err}") from None
    except (_Invalid, containers.NotReadable) as err:
        raise NotALocation(f"{p} is not a Kalles Fraktaler or Fraktaler-3 location: {err}") from None
