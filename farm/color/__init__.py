"""Colouring: from a frame's raw data and its smoothed statistics to RGB.

- :mod:`farm.color.stats`: the frame's CDF of escape counts, smoothed over
  neighbouring frames against flicker (:class:`Statistics`, :class:`FrameStats`);
- :mod:`farm.color.methods`: the colour methods (``shade``, ``histogram``,
  ``smooth``, ``distance``), one numpy function each with one signature
  ``(RawFrame, FrameStats, Style) -> uint8 (H, W, 3)``: the reference;
- :mod:`farm.color.distance`: the distance to the set (stored or estimated from the
  escape time), filament lines and relief shading;
- :mod:`farm.spec.palettes`: built-in palettes and gradient files;
- :mod:`farm.color.render`: a whole frame on every core (row bands on threads),
  anti-aliasing samples averaged in linear light.
- :mod:`farm.color.yuv`: a video's frames as the encoder takes them (``yuv420p``
  planes), made from the colours where the method allows it.

``farm.compute.color`` runs the same methods as an OpenCL kernel
(``kernels/color.cl``), tested against these.
"""

from __future__ import annotations

import numpy as np

from farm.color.methods import METHODS, Style
from farm.color.raw import RawFrame
from farm.color.render import colour
from farm.color.stats import FrameStats, Statistics, cdf, smoothed_cdfs
from farm.spec.palettes import lut

__all__ = ["METHODS", "FrameStats", "RawFrame", "Statistics", "Style", "cdf", "colorize", "colour",
           "smoothed_cdfs"]


def colorize(iterations: np.ndarray, fraction: np.ndarray, frame_cdf: np.ndarray,
             palette: str, cycles: float) -> np.ndarray:
    """RGB uint8 ``(H, W, 3)`` of one frame by the histogram method, given its CDF."""
    raw = RawFrame(0, iterations, fraction, np.zeros(1, np.int64))
    style = Style(method="histogram", lut=lut(palette), cycles=cycles)
    return colour(raw, FrameStats.from_cdf(0, np.asarray(frame_cdf, np.float64)), style)
