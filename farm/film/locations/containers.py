"""Text that explorers hide in their images: PNG text chunks and OpenEXR header attributes.

Kalles Fraktaler 2+ and Fraktaler-3 store the parameters of a picture inside it:

* PNG: a text chunk with the keyword ``Comment`` (matched without regard to case:
  image tools lower-case it), before or after the image data. The chunk may be
  ``tEXt`` (Latin-1), ``zTXt`` (zlib-compressed Latin-1) or ``iTXt`` (UTF-8, maybe
  compressed). The PNG format: an 8-byte signature, then chunks of a 4-byte big-endian
  length, a 4-byte type, the data and a 4-byte CRC.
* OpenEXR: string attributes of the (first) header, ``KallesFraktaler2+`` (KF's
  ``Key: value`` text) and ``Fraktaler3`` (F3's TOML). The header follows the magic
  number ``76 2f 31 01`` and a 4-byte version field: attributes, each a name and a
  type name (both NUL-terminated), a 4-byte little-endian size and the value,
  until an empty name (a lone NUL byte).

Both are read here without an image library: only the metadata is needed, and a
PNG's pixel data or an EXR's channels are never decoded.
"""

from __future__ import annotations

import struct
import zlib
from typing import BinaryIO

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXR_MAGIC = b"\x76\x2f\x31\x01"
MAX_TEXT = 64 << 20  # bytes: a text chunk or attribute larger than this is not metadata


class NotReadable(ValueError):
    """The bytes are not a well-formed file of the expected kind (one-phrase message)."""


def _read_exact(fh: BinaryIO, n: int, what: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise NotReadable(f"it ends inside {what}")
    return data


def _png_text(kind: bytes, data: bytes) -> tuple[str, str] | None:
    """(keyword, text) of a tEXt, zTXt or iTXt chunk's data; None when malformed."""
    keyword, sep, rest = data.partition(b"\0")
    if not sep:
        return None
    try:
        if kind == b"tEXt":
            return keyword.decode("latin-1"), rest.decode("latin-1")
        if kind == b"zTXt":  # compression method byte (0: zlib), then the stream
            return keyword.decode("latin-1"), zlib.decompress(rest[1:]).decode("latin-1")
        flag, _method = rest[0], rest[1]  # iTXt: flag, method, language\0, keyword\0, text
        _lang, _, rest = rest[2:].partition(b"\0")
        _translated, _, text = rest.partition(b"\0")
        if flag:
            text = zlib.decompress(text)
        return keyword.decode("latin-1"), text.decode("utf-8")
    except (IndexError, zlib.error, UnicodeDecodeError):
        return None


def png_texts(fh: BinaryIO) -> list[tuple[str, str]]:
    """Every (keyword, text) of a PNG's text chunks, in file order. Image data is
    skipped, not read. NotReadable when the file is not a PNG."""
    if fh.read(8) != PNG_SIGNATURE:
        raise NotReadable("it is not a PNG file")
    out: list[tuple[str, str]] = []
    while True:
        head = fh.read(8)
        if len(head) < 8:
            return out  # a truncated file: what was found so far
        length, kind = struct.unpack(">I4s", head)
        if kind in (b"tEXt", b"zTXt", b"iTXt") and length <= MAX_TEXT:
            text = _png_text(kind, _read_exact(fh, length, "a text chunk"))
            if text is not None:
                out.append(text)
            fh.seek(4, 1)  # CRC
        else:
            fh.seek(length + 4, 1)
        if kind == b"IEND":
            return out


def png_comment(fh: BinaryIO) -> str | None:
    """The text of a PNG's ``Comment`` chunk (any case), or None."""
    for keyword, text in png_texts(fh):
        if keyword.lower() == "comment":
            return text
    return None


def _cstring(fh: BinaryIO, what: str, limit: int = 256) -> bytes:
    out = bytearray()
    while True:
        c = fh.read(1)
        if not c:
            raise NotReadable(f"it ends inside {what}")
        if c == b"\0":
            return bytes(out)
        out += c
        if len(out) > limit:
            raise NotReadable(f"{what} is longer than {limit} bytes")


def exr_attributes(fh: BinaryIO) -> dict[str, tuple[str, bytes]]:
    """The first header's attributes of an OpenEXR file: name -> (type name, raw value
    bytes). NotReadable when the file is not OpenEXR."""
    if fh.read(4) != EXR_MAGIC:
        raise NotReadable("it is not an OpenEXR file")
    _read_exact(fh, 4, "the version field")
    out: dict[str, tuple[str, bytes]] = {}
    while True:
        name = _cstring(fh, "an attribute name")
        if not name:
            return out
        kind = _cstring(fh, "an attribute type")
        (size,) = struct.unpack("<i", _read_exact(fh, 4, "an attribute size"))
        if not 0 <= size <= MAX_TEXT:
            raise NotReadable(f"attribute {name.decode('latin-1')!r} claims {size} bytes")
        out[name.decode("latin-1")] = (kind.decode("latin-1"), _read_exact(fh, size, "an attribute"))


def exr_strings(fh: BinaryIO) -> dict[str, str]:
    """The ``string`` attributes of an OpenEXR file's first header (UTF-8, else Latin-1)."""
    out = {}
    for name, (kind, value) in exr_attributes(fh).items():
        if kind == "string":
            try:
                out[name] = value.decode("utf-8")
            except UnicodeDecodeError:
                out[name] = value.decode("latin-1")
    return out
