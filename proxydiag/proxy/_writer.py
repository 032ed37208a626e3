"""Write a safetensors checkpoint whose tensors are byte ranges of another, tensor by tensor.

Each output tensor is a source tensor whole, or some of its slices along the first dimension
(kept experts of a fused tensor, kept router rows). The header is known before any data (the
shapes follow from the plan), so each shard is written front to back with the kernel copying
the ranges (``copy_file_range``): the process holds no tensor, whatever its size. Shards and
their index follow ``transformers``' naming (``model-00001-of-00002.safetensors``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from proxydiag.proxy._tensors import INDEX_NAME, TensorInfo

#: bytes copied per system call when the kernel cannot copy between the files itself
COPY_CHUNK_BYTES = 64 << 20


@dataclass(frozen=True)
class OutTensor:
    """Output tensor ``name``: ``source`` whole (``rows`` None) or its slices ``rows``."""

    name: str
    source: TensorInfo
    rows: tuple[int, ...] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        if self.rows is None:
            return self.source.shape
        return (len(self.rows), *self.source.shape[1:])

    @property
    def nbytes(self) -> int:
        if self.rows is None:
            return self.source.nbytes
        return len(self.rows) * self.source.row_bytes()

    def ranges(self) -> list[tuple[int, int]]:
        """``(offset, count)`` byte ranges of the source, adjacent slices merged."""
        if self.rows is None:
            return [(self.source.start, self.source.nbytes)]
        width = self.source.row_bytes()
        merged: list[tuple[int, int]] = []
        for row in self.rows:
            offset = self.source.start + row * width
            if merged and merged[-1][0] + merged[-1][1] == offset:
                merged[-1] = (merged[-1][0], merged[-1][1] + width)
            else:
                merged.append((offset, width))
        return merged


def write_checkpoint(
    folder: Path, tensors: list[OutTensor], *, metadata: dict[str, str], max_shard_bytes: int
) -> list[str]:
    """Write ``tensors`` into ``folder`` as one ``model.safetensors`` or indexed shards."""
    shards = _plan(tensors, max_shard_bytes)
    names = (
        ["model.safetensors"]
        if len(shards) == 1
        else [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    )
    weight_map: dict[str, str] = {}
    for name, shard in zip(names, shards, strict=True):
        _write_shard(folder / name, shard, metadata)
        weight_map.update({t.name: name for t in shard})
    if len(shards) > 1:
        index = {
            "metadata": {"total_size": sum(t.nbytes for t in tensors)},
            "weight_map": dict(sorted(weight_map.items())),
        }
        (folder / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return names


def _plan(tensors: list[OutTensor], max_shard_bytes: int) -> list[list[OutTensor]]:
    shards: list[list[OutTensor]] = [[]]
    size = 0
    for t in tensors:
        if shards[-1] and size + t.nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(t)
        size += t.nbytes
    return shards


def _write_shard(path: Path, tensors: list[OutTensor], metadata: dict[str, str]) -> None:
    header: dict[str, object] = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for t in tensors:
        header[t.name] = {
            "dtype": t.source.dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + t.nbytes],
        }
        offset += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with path.open("wb") as dst:
        dst.write(len(raw).to_bytes(8, "little") + raw)
        dst.flush()
        for t in tensors:
            fd = os.open(t.source.file, os.O_RDONLY)
            try:
                for start, count in t.ranges():
                    _copy(fd, dst.fileno(), start, count)
            finally:
                os.close(fd)


def _copy(src: int, dst: int, offset: int, count: int) -> None:
    """Append ``count`` bytes of ``src`` from ``offset`` to ``dst`` (at its position)."""
    end = offset + count
    while offset < end:
        try:
            done = os.copy_file_range(src, dst, end - offset, offset)
        except OSError:  # filesystems that refuse it (EXDEV, EINVAL): through a buffer
            chunk = os.pread(src, min(COPY_CHUNK_BYTES, end - offset), offset)
            done = os.write(dst, chunk) if chunk else 0
        if done == 0:
            raise OSError(f"source ended at byte {offset}, {end - offset} bytes short")
        offset += done
