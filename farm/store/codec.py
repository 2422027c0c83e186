"""How a tile's bytes are stored: as they are, or shuffled and compressed with zstd.

A store's pixel channels (``iterations``, ``fraction``, ...) are chunked by tile. In a
compressed store (format 9, ``output.compression = "zstd"``, the default) each chunk
goes through two registered HDF5 filters, in this order:

1. ``shuffle`` (HDF5's built-in filter 2): the chunk's bytes regrouped by their place
   in an element (every element's byte 0, then every byte 1, ...). Counts and smooth
   offsets vary slowly, so their high bytes become long runs.
2. ``zstd`` (filter 32015, registered by the HDF5 Zstandard plugin that the
   ``hdf5plugin`` package ships), level ``output.compression_level`` (1 by default).

So ``h5py`` with ``import hdf5plugin``, or ``h5dump`` with ``HDF5_PLUGIN_PATH`` set to
hdf5plugin's plugin folder, read a compressed store like any other. The farm itself
decodes chunks with the ``zstandard`` package (:meth:`Codec.decode`) and needs no
plugin.

Fixed slots. The store's HDF5 metadata is written once, when it is created, and never
again (farm/store/layout.py): a render writes chunk bytes in place. A compressed chunk
has no fixed size, so every chunk is given a *slot* of :meth:`Codec.slot_bytes` bytes,
zstd's bound for the chunk's raw size plus 8, recorded in HDF5's chunk index as the
chunk's size. A tile is stored as its zstd frame followed by the 8-byte header of a
zstd *skippable frame* that spans the rest of the slot (:meth:`Codec.stored`); zstd
decoders, the HDF5 plugin's among them, skip such frames, so whatever the rest of the
slot holds is never read as data. The rest is never written either: the store is
created sparse (:class:`SparseWriter`) and the unwritten part of each slot stays a
hole, so the store takes the compressed size on disk (``du``), while its apparent size
(``ls -l``) is the uncompressed one. A tile rendered again (a retry, a resume) is
written over its slot, whatever its new length.

Checksums. ``tiles/crc`` is the low 32 bits of the XXH3-64 hash of the tile's stored
frames, channel after channel (compressed stores; :func:`payload_crc`: xxhash runs at
memory speed, zlib's crc32 took 7 ms of a packing thread per 1080p frame), or the
crc32 of its raw channel bytes cropped to the tile (uncompressed stores, format 8 as
before; :func:`raw_crc`). ``tiles/bytes``
(compressed stores) holds each channel's frame length, so a reader reads just those
bytes. Workers pack tiles (:func:`pack`): the master only writes bytes down.
"""

from __future__ import annotations

import io
import os
import struct
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xxhash
import zstandard

from farm.errors import StoreError
from farm.plan.channels import Channel

SHUFFLE_FILTER = 2  # HDF5's built-in byte shuffle
ZSTD_FILTER = 32015  # the registered id of HDF5's Zstandard filter (hdf5plugin: Zstd)
SKIPPABLE_MAGIC = 0x184D2A50  # the first of zstd's 16 skippable-frame magic numbers
CODECS = ("zstd", "none")
# Compressed size over raw size by kind of value (numpy dtype kind), for estimates
# (farm validate, the free-space check): counts (u) and smooth offsets (f), and the
# distance estimate (c), from the benchmarks' stores (BENCHMARKS.md, "The compact
# store"). The smooth offsets' low mantissa bits are noise: they set the floor.
ESTIMATE = {"u": 0.25, "f": 0.70, "c": 0.75}
FS_BLOCK = 4096  # a file system block: what a partly written range may take beyond its bytes


def compress_bound(n: int) -> int:
    """zstd's worst-case size of a frame holding ``n`` bytes (ZSTD_COMPRESSBOUND)."""
    margin = ((128 << 10) - n) >> 11 if n < (128 << 10) else 0
    return n + (n >> 8) + margin


def shuffle(chunk: np.ndarray) -> np.ndarray:
    """HDF5's shuffle of a contiguous array: byte k of every element, for k = 0, 1, ...
    (one plane at a time: a whole transposed copy was 4x slower)."""
    size = chunk.dtype.itemsize
    elements = np.ascontiguousarray(chunk).reshape(-1).view(np.uint8).reshape(-1, size)
    out = np.empty((size, len(elements)), np.uint8)
    for k in range(size):
        out[k] = elements[:, k]
    return out


def unshuffle(data: bytes | memoryview | np.ndarray, dtype: np.dtype, shape: tuple[int, ...],
              out: np.ndarray | None = None) -> np.ndarray:
    """The inverse of :func:`shuffle`: an array of ``dtype`` and ``shape``, written into
    ``out`` (C-contiguous, that dtype and shape) when given."""
    size = np.dtype(dtype).itemsize
    planes = np.frombuffer(data, dtype=np.uint8).reshape(size, -1)
    if out is None:
        out = np.empty(shape, dtype)
    elements = out.reshape(-1).view(np.uint8).reshape(-1, size)
    for k in range(size):
        elements[:, k] = planes[k]
    return out


_local = threading.local()  # zstd contexts are not shared between threads


def _compressor(level: int) -> zstandard.ZstdCompressor:
    cache = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    if level not in cache:  # the content size is written into the frame header (readers size by it)
        cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=True)
    return cache[level]


def _decompressor() -> zstandard.ZstdDecompressor:
    if not hasattr(_local, "decompressor"):
        _local.decompressor = zstandard.ZstdDecompressor()
    return _local.decompressor


@dataclass(frozen=True)
class Codec:
    """A store's chunk encoding: ``"zstd"`` (shuffle, then zstd at ``level``) or
    ``"none"`` (raw bytes: format 8 stores, and ``output.compression = "none"``)."""

    name: str = "zstd"
    level: int = 1

    @property
    def compressed(self) -> bool:
        return self.name != "none"

    def slot_bytes(self, raw: int) -> int:
        """Bytes reserved in the file for a chunk of ``raw`` uncompressed bytes."""
        return compress_bound(raw) + 8 if self.compressed else raw

    def encode(self, chunk: np.ndarray) -> bytes:
        """A full chunk (contiguous, the dataset's chunk shape) as it is stored, without
        the slot's padding header (:meth:`stored` adds it)."""
        if not self.compressed:
            return np.ascontiguousarray(chunk).tobytes()
        return _compressor(self.level).compress(shuffle(np.ascontiguousarray(chunk)).data)

    def encode_planes(self, planes: np.ndarray) -> bytes:
        """A chunk already shuffled (byte planes, as :func:`shuffle` makes them; the
        device shuffles a compressed store's tiles: kernels/shuffle.cl) as it is stored."""
        if not self.compressed:
            raise ValueError("an uncompressed store keeps chunks as they are, not shuffled")
        return _compressor(self.level).compress(np.ascontiguousarray(planes).data)

    def trailer(self, length: int, slot: int) -> bytes:
        """What follows a payload of ``length`` bytes in a slot of ``slot`` bytes: the
        header of a skippable frame that spans the rest of the slot (compressed), or
        nothing (raw)."""
        if not self.compressed:
            return b""
        rest = slot - length - 8
        if rest < 0:  # cannot happen: zstd stays within compress_bound
            raise StoreError(f"a compressed tile of {length} bytes exceeds its slot of {slot}")
        return struct.pack("<II", SKIPPABLE_MAGIC, rest)

    def stored(self, payload: bytes | memoryview, slot: int) -> bytes:
        """The bytes at the start of a slot: the payload, then its trailer."""
        return bytes(payload) + self.trailer(len(payload), slot)

    def decode(self, payload: bytes | memoryview, dtype: str | np.dtype, shape: tuple[int, ...],
               out: np.ndarray | None = None) -> np.ndarray:
        """A chunk back from its stored bytes (the payload; trailing bytes are ignored),
        into ``out`` (C-contiguous, ``dtype`` and ``shape``) when given."""
        dtype = np.dtype(dtype)
        if not self.compressed:
            n = int(np.prod(shape))
            chunk = np.frombuffer(payload, dtype=dtype, count=n).reshape(shape)
            if out is None:
                return chunk
            out[...] = chunk
            return out
        raw = _decompressor().decompress(payload)
        return unshuffle(raw, dtype, shape, out)

    def decode_planes(self, payload: bytes | memoryview, nbytes: int) -> np.ndarray:
        """A compressed chunk's byte planes (uint8, ``nbytes``: the chunk's raw size), zstd
        undone and the shuffle not (:func:`unshuffle` or the device's element_bytes,
        kernels/shuffle.cl, does that)."""
        if not self.compressed:
            raise ValueError("an uncompressed store keeps chunks as they are, not shuffled")
        planes = np.frombuffer(_decompressor().decompress(payload), np.uint8)
        if planes.size != nbytes:
            raise StoreError(f"a compressed chunk holds {planes.size} bytes, not {nbytes}")
        return planes

    def estimate(self, channel: Channel, pixels: int) -> int:
        """Bytes one chunk of ``pixels`` pixels of ``channel`` takes on disk: its raw size,
        or, compressed, the share ESTIMATE gives for its kind of values (the largest
        measured on the benchmarks' zooms) plus a file system block for the slot's last,
        partly written block."""
        raw = channel.nbytes(pixels)
        if not self.compressed:
            return raw
        return int(raw * ESTIMATE[np.dtype(channel.dtype).kind]) + FS_BLOCK

    def filters(self) -> list[tuple[int, tuple[int, ...]]]:
        """The HDF5 filter pipeline of a chunk: (filter id, client values)."""
        return [(SHUFFLE_FILTER, ()), (ZSTD_FILTER, (self.level,))] if self.compressed else []

    @classmethod
    def of(cls, pipeline: Sequence[tuple[int, Sequence[int]]]) -> Codec | None:
        """The codec of a dataset with this filter pipeline, or None when the farm
        cannot write it in place (repacked with other filters)."""
        ids = [code for code, _ in pipeline]
        if not ids:
            return cls("none")
        if ids == [SHUFFLE_FILTER, ZSTD_FILTER]:
            values = list(pipeline[1][1])
            return cls("zstd", int(values[0]) if values else 3)
        return None


ZSTD = Codec("zstd")  # the default for new stores
RAW = Codec("none")  # format 8 stores, and output.compression = "none"


def raw_crc(arrays: Sequence[np.ndarray]) -> int:
    """crc32 of a tile's channel arrays in channel order, each tile-sized and row-major
    (``tiles/crc`` of an uncompressed store)."""
    crc = 0
    for arr in arrays:
        crc = zlib.crc32(np.ascontiguousarray(arr).data, crc)
    return crc


def payload_crc(payloads: Sequence[bytes | memoryview]) -> int:
    """``tiles/crc`` of a compressed store: the low 32 bits of the XXH3-64 hash of the
    tile's stored frames, one after another in channel order."""
    digest = xxhash.xxh3_64()
    for p in payloads:
        digest.update(p)
    return digest.intdigest() & 0xFFFFFFFF


@dataclass
class Packed:
    """A tile as the store takes it: one payload per channel (the chunk's stored bytes
    without the slot's padding header) and ``tiles/crc``."""

    payloads: list[bytes | memoryview]
    crc: int


def pack_planes(codec: Codec, planes: Sequence[np.ndarray]) -> Packed:
    """Encode one tile whose channels the device has shuffled (each the full chunk's byte
    planes): the same bytes :func:`pack` makes from the unshuffled channels."""
    payloads: list[bytes | memoryview] = [codec.encode_planes(p) for p in planes]
    return Packed(payloads, payload_crc(payloads))


def pack(codec: Codec, blocks: Sequence[np.ndarray], tile_hw: tuple[int, int],
         chunk_hw: tuple[int, int]) -> Packed:
    """Encode one tile: ``blocks`` are its channels' computed pixels, each
    ``(h, w[, depth])`` at the tile's top-left (an expmap region may be smaller than its
    tile: the rest is filler, zeros); ``tile_hw`` is the tile's size in the image,
    ``chunk_hw`` the chunk's (edge tiles are padded with zeros to a full chunk)."""
    th, tw = chunk_hw
    payloads: list[bytes | memoryview] = []
    crops = []
    for block in blocks:
        h, w = block.shape[:2]
        if (h, w) == (th, tw):
            chunk = block
        else:
            chunk = np.zeros((th, tw, *block.shape[2:]), block.dtype)
            chunk[:h, :w] = block
        payloads.append(codec.encode(chunk))
        if not codec.compressed:
            crops.append(chunk[:tile_hw[0], :tile_hw[1]])
    crc = payload_crc(payloads) if codec.compressed else raw_crc(crops)
    return Packed(payloads, crc)


class SparseWriter(io.RawIOBase):
    """A file for h5py's ``fileobj`` driver that leaves the slots' unused bytes as holes.

    Creating a compressed store writes every chunk once through HDF5 (so that its index
    records the chunk at full slot size): a slot's bytes are the frame of an all-zero
    chunk, the skippable header, then zeros. ``templates`` maps a slot's length to
    those leading bytes; a write of exactly that length that begins with them writes
    the leading bytes and seeks over the zeros, which the file system then keeps as a
    hole. Everything else is written as given."""

    def __init__(self, path: str | os.PathLike[str], templates: dict[int, bytes]):
        super().__init__()
        self._file = open(path, "w+b")  # noqa: SIM115 (closed in close())
        self._templates = templates

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer) -> int:
        return self._file.readinto(buffer)

    def truncate(self, size: int | None = None) -> int:
        return self._file.truncate(size)

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def fileno(self) -> int:
        return self._file.fileno()

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        head = self._templates.get(len(view))
        if head is not None and view[:len(head)] == head:
            self._file.write(head)
            self._file.seek(len(view) - len(head), os.SEEK_CUR)
            return len(view)
        return self._file.write(view)

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        super().close()
