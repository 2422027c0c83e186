"""What an explorer's location file says, in the farm's terms (before any job is made).

A :class:`Location` holds the view (centre and zoom as the decimal strings the
source wrote), the source's iteration limit, palette and image size where it has
them, and one line for each setting the farm cannot honour (``notes``).

The zoom convention of both Kalles Fraktaler 2+ and Fraktaler-3: the view's height
is ``4 / Zoom`` complex-plane units (KF: half height ``2 / Zoom``; F3: pixel spacing
``4 / (Zoom H)``), the imaginary axis up, the centre at the image's centre.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

KF = "Kalles Fraktaler"
F3 = "Fraktaler-3"
DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

RGB = tuple[int, int, int]


class Invalid(ValueError):
    """The file is not a KF or F3 location (the message says why, one phrase)."""


@dataclass(frozen=True)
class Location:
    program: str  # KF or F3
    real: str | None  # decimal strings: the view's centre (None: a palette without a view)
    imag: str | None
    zoom: str | None  # decimal string > 0: the view's height is 4 / zoom
    iterations: int | None = None  # the source's iteration limit
    escape_radius: float | None = None  # the source's, when the farm can use it (2..128)
    size: tuple[int, int] | None = None  # (W, H) pixels, when the source says
    colours: tuple[RGB, ...] = ()  # the source's palette, evenly spread and cyclic
    rotate: float = 0.0  # degrees, the source's rotation (not honoured yet: see notes)
    notes: tuple[str, ...] = ()  # one line per setting the farm cannot honour

    @property
    def has_view(self) -> bool:
        return self.real is not None and self.imag is not None and self.zoom is not None


def decimal_text(value: object, what: str) -> str:
    """A decimal number as the source wrote it (whitespace removed: long strings may be
    broken across lines); Invalid naming ``what`` when it is not one."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise Invalid(f"{what} is {value!r}, not a number")
    text = re.sub(r"\s+", "", value if isinstance(value, str) else repr(value))
    if not DECIMAL.fullmatch(text):
        raise Invalid(f"{what} is {text[:40]!r}, not a decimal number")
    return text


def positive_zoom(value: object, what: str) -> str:
    """:func:`decimal_text` of a zoom factor, which must be > 0."""
    text = decimal_text(value, what)
    if Decimal(text) <= 0:
        raise Invalid(f"{what} is {text}, not > 0")
    return text
