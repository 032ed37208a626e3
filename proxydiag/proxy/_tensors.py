"""Safetensors checkpoints read and written by byte range, never whole.

The format (huggingface/safetensors, ``docs/source/index.mdx``): an 8-byte little-endian
header length, a JSON header mapping each tensor to ``dtype``, ``shape`` and ``data_offsets``
relative to the data that follows, then the raw row-major data. So one expert of a per-expert
tensor, one expert's slab of a fused ``(experts, ...)`` tensor and one router row are each a
contiguous byte range: pruning is copying ranges, in any dtype (bf16, fp8 included), without
decoding. Reads use ``pread`` rather than a memory map: mapped pages count in the process's
resident memory until the kernel drops them, and a map of a 100 GB shard would look like a
100 GB process.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from proxydiag.errors import IngestError

#: bytes per element of each safetensors dtype (sub-byte dtypes are not supported)
DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
}
#: the safetensors library refuses headers over 100 MB (``MAX_HEADER_SIZE``); so do we
MAX_HEADER_BYTES = 100_000_000
INDEX_NAME = "model.safetensors.index.json"


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor's bytes are: ``file`` bytes ``[start, end)``."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: Path
    start: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def row_bytes(self) -> int:
        """Bytes of one slice along the first dimension."""
        return self.nbytes // self.shape[0] if self.shape and self.shape[0] else 0


def read_header(path: Path) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """The tensors of one ``.safetensors`` file and its ``__metadata__``, checked for bounds.

    A truncated or malformed file is an :class:`~proxydiag.errors.IngestError` naming it.
    """
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise IngestError(f"{path}: truncated safetensors file ({size} bytes, no header)")
        n = int.from_bytes(head, "little")
        if n > MAX_HEADER_BYTES or 8 + n > size:
            raise IngestError(
                f"{path}: malformed safetensors header (says {n} bytes, the file "
                f"has {size}); the file is truncated or not safetensors"
            )
        raw = fh.read(n)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(f"{path}: malformed safetensors header ({exc})") from exc
    if not isinstance(header, dict):
        raise IngestError(f"{path}: malformed safetensors header (not a JSON object)")
    meta = header.pop("__metadata__", None) or {}
    tensors = {name: _info(path, name, entry, 8 + n, size) for name, entry in header.items()}
    return tensors, {str(k): str(v) for k, v in meta.items()}


def _info(path: Path, name: str, entry: object, base: int, size: int) -> TensorInfo:
    try:
        dtype, shape, (lo, hi) = entry["dtype"], entry["shape"], entry["data_offsets"]  # type: ignore[index]
        shape = tuple(int(d) for d in shape)
    except (KeyError, TypeError, ValueError) as exc:
        raise IngestError(f"{path}: malformed safetensors entry for {name!r} ({exc})") from exc
    if dtype not in DTYPE_BYTES:
        raise IngestError(
            f"{path}: tensor {name!r} has dtype {dtype!r}, which proxydiag "
            f"cannot slice (known: {', '.join(DTYPE_BYTES)})"
        )
    if hi - lo != math.prod(shape) * DTYPE_BYTES[dtype] or lo < 0:
        raise IngestError(
            f"{path}: tensor {name!r} spans bytes {lo}..{hi}, which does not "
            f"match its shape {list(shape)} of {dtype}"
        )
    if base + hi > size:
        raise IngestError(
            f"{path}: truncated: tensor {name!r} ends at byte {base + hi}, the file has {size}"
        )
    return TensorInfo(name, dtype, shape, path, base + lo, base + hi)


def open_checkpoint(folder: Path) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """Every tensor of a checkpoint folder, with or without ``model.safetensors.index.json``."""
    index = folder / INDEX_NAME
    if index.exists():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            shards = sorted({str(v) for v in weight_map.values()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise IngestError(f"{index}: malformed index ({exc})") from exc
    else:
        weight_map = None
        shards = sorted(p.name for p in folder.glob("*.safetensors"))
    if not shards:
        raise IngestError(
            f"{folder}: no *.safetensors weights (a .bin checkpoint must be "
            "converted to safetensors first)"
        )
    tensors: dict[str, TensorInfo] = {}
    meta: dict[str, str] = {}
    for shard in shards:
        if not (folder / shard).is_file():
            raise IngestError(f"{index}: shard {shard} is missing")
        found, meta = read_header(folder / shard)
        tensors.update(found)
    missing = sorted(set(weight_map or ()) - set(tensors))
    if missing:
        raise IngestError(
            f"{index}: {len(missing)} tensors listed are in no shard, e.g. {missing[0]!r}"
        )
    return tensors, meta


def read_floats(info: TensorInfo, start: int, count: int) -> np.ndarray:
    """Elements ``[start, start + count)`` of a float tensor, as float32 (bf16 widened exactly).

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "t.safetensors"
    >>> data = np.array([1.5, -2.0, 3.25], dtype=np.float32)
    >>> head = json.dumps({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}}).encode()
    >>> _ = p.write_bytes(len(head).to_bytes(8, "little") + head + data.tobytes())
    >>> read_floats(read_header(p)[0]["t"], 1, 2).tolist()
    [-2.0, 3.25]
    """
    width = DTYPE_BYTES[info.dtype]
    raw = read_bytes(info.file, info.start + start * width, count * width)
    if info.dtype == "BF16":
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    if info.dtype in ("F32", "F16", "F64"):
        kind = {"F32": "<f4", "F16": "<f2", "F64": "<f8"}[info.dtype]
        return np.frombuffer(raw, dtype=kind).astype(np.float32)
    if info.dtype in _FP8:
        return _FP8[info.dtype][np.frombuffer(raw, dtype=np.uint8)]
    raise IngestError(
        f"{info.file}: tensor {info.name!r} is {info.dtype}; clustering on "
        "weights reads float tensors (use a calibration method)"
    )


def fp8_table(*, exp_bits: int, man_bits: int, bias: int, ieee: bool) -> np.ndarray:
    """The float32 value of each of the 256 codes of an 8-bit float format.

    ``ieee`` formats (E5M2) reserve the top exponent for inf and NaN; the ``fn`` formats
    (E4M3FN, the one safetensors calls F8_E4M3) have no inf and one NaN mantissa (OCP 8-bit
    floating point specification, 2023).

    >>> fp8_table(exp_bits=4, man_bits=3, bias=7, ieee=False)[[0x38, 0x7E, 0x01]].tolist()
    [1.0, 448.0, 0.001953125]
    """
    code = np.arange(256)
    top = (1 << exp_bits) - 1
    exp, man = (code >> man_bits) & top, code & ((1 << man_bits) - 1)
    frac = man / float(1 << man_bits)
    value = np.where(exp == 0, frac * 2.0 ** (1 - bias), (1 + frac) * 2.0 ** (exp - bias))
    if ieee:
        value = np.where(exp == top, np.where(man == 0, np.inf, np.nan), value)
    else:
        value = np.where((exp == top) & (man == (1 << man_bits) - 1), np.nan, value)
    return (np.where(code & 0x80, -value, value)).astype(np.float32)


_FP8 = {
    "F8_E4M3": fp8_table(exp_bits=4, man_bits=3, bias=7, ieee=False),
    "F8_E5M2": fp8_table(exp_bits=5, man_bits=2, bias=15, ieee=True),
}


def read_bytes(path: Path, offset: int, count: int) -> bytes:
    """``count`` bytes of ``path`` from ``offset`` (a short read is a truncated file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, count, offset)
    finally:
        os.close(fd)
    if len(data) != count:
        raise IngestError(f"{path}: truncated at byte {offset + len(data)}")
    return data
