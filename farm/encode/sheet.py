"""A contact sheet: small frames in a grid, each with lines of text under it (one PNG).

``farm preview`` (farm/film/preview.py) shows a film's shape with it. The sheet has a
title line at the top, then rows of ``columns`` thumbnails (all of one size) on a dark
background, each captioned with its lines in Pillow's built-in font.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from farm.encode.outputs import save_png

BACKGROUND = (24, 24, 28)
TEXT = (235, 235, 235)
DIM = (160, 160, 170)
FONT_PX = 13
GAP = 8  # pixels between thumbnails and around the sheet


LINE = FONT_PX + 4  # pixels per line of text


def layout(count: int, size: tuple[int, int], lines: int,
           columns: int) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """((sheet width, sheet height), the top-left corner of each of ``count`` frames of
    ``size`` (w, h) with ``lines`` lines of caption), in rows of ``columns``."""
    w, h = size
    cols = max(1, min(columns, count))
    rows = -(-count // cols)
    cell_w, cell_h = w + GAP, h + lines * LINE + GAP
    head = LINE + 2 * GAP
    corners = [(GAP + (k % cols) * cell_w, head + (k // cols) * cell_h) for k in range(count)]
    return (GAP + cols * cell_w, head + rows * cell_h), corners


def contact_sheet(frames: Sequence[np.ndarray], captions: Sequence[Sequence[str]], title: str,
                  columns: int = 4) -> np.ndarray:
    """The sheet as uint8 (H, W, 3): ``frames`` uint8 (h, w, 3) of one size, in rows of
    ``columns`` (:func:`layout`), ``captions[k]`` the lines under frame k."""
    if not frames:
        raise ValueError("no frames for a contact sheet")
    h, w, _ = frames[0].shape
    font = ImageFont.load_default(size=FONT_PX)
    size, corners = layout(len(frames), (w, h), max(len(c) for c in captions), columns)
    sheet = Image.new("RGB", size, BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    draw.text((GAP, GAP), title, fill=TEXT, font=font)
    for (x, y), rgb, caption in zip(corners, frames, captions, strict=True):
        sheet.paste(Image.fromarray(np.ascontiguousarray(rgb[:h, :w])), (x, y))
        for n, text in enumerate(caption):
            draw.text((x, y + h + 2 + n * LINE), text, fill=TEXT if n == 0 else DIM, font=font)
    return np.asarray(sheet)


def write_sheet(path: str | os.PathLike[str], frames: Sequence[np.ndarray],
                captions: Sequence[Sequence[str]], title: str, columns: int = 4) -> Path:
    """Write :func:`contact_sheet` as a PNG at ``path`` (atomically); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_png(contact_sheet(frames, captions, title, columns), out)
    return out
