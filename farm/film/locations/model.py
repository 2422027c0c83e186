"""What an explorer's location file says, in the farm's terms (before any job is made).

A :class:`Location` holds the view (centre and zoom as the decimal strings the
source wrote), the source's iteration limit, palette and image size where it has
them, and one line for each setting the farm cannot honour (``notes``).

The zoom convention of both Kalles Fraktaler 2+ and Fraktaler-3: the view's height
is ``4 / Zoom`` complex-plane units (KF: half height ``2 / Zoom``; F3: pixel spacing
``4 / (Zoom H)``), the centre at the image's centre.

Orientation and rotation, in the farm's terms (its ``view.angle``: degrees
counter-clockwise, ``c = C + s e^(i angle) (u + i v)`` with v up; farm/numerics):

* F3 (src/param.cc, src/matrix.h, src/hybrid.cc: ``c = C + s K (u, v)`` with K the
  rotation matrix ``[[cos r, -sin r], [sin r, cos r]]`` of ``transform.rotate`` = r
  degrees, v = j + 1/2 - H/2 with row j counted from the bottom: images are flipped
  on saving): the imaginary axis up, and ``angle = transform.rotate``;
* KF (fraktal_sft.cpp GetPixelCoordinates, common/matrix.cpp, Settings.cpp): ``c = C
  + s G R(r) (u, v)`` with row j counted from the top (v = j - H/2), ``R(r)`` the
  counter-clockwise rotation by ``RotateAngle`` = r degrees and ``G = diag(1, -1)``
  with ``ImagPointsUp: 1``, the identity without it (KF's default: its imaginary axis
  points down). With ImagPointsUp the view is ``angle = -RotateAngle``; without it
  KF's picture is the mirror image of that view, which is the view of the conjugate
  centre ``Re - Im i`` at ``angle = -RotateAngle`` (the set is symmetric about the
  real axis: each pixel's point is the conjugate of KF's, with the same escape time).
  So a KF location is imported as that (``conjugate``), and the farm renders KF's
  picture.
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
    angle: float = 0.0  # the farm's view.angle: degrees counter-clockwise (see above)
    # the source draws the imaginary axis down (KF without ImagPointsUp): the job centres
    # on the conjugate point, whose view is the source's picture
    conjugate: bool = False
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
