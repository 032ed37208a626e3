"""Compiled-code helpers for the TensorBoard reader: numba with an on-disk cache, inlining,
arrays borrowed without reference counts, and unchecked little-endian reads.

numba compiles on first use; ``cache=True`` keeps the machine code beside the module (or in
``NUMBA_CACHE_DIR``) so later processes load it in milliseconds. Where no cache location is
writable, :func:`jit` compiles without a cache rather than failing. (numba's cache checks the
timestamp of the function's own file only: a cached caller keeps an inlined helper from
another file as it was; a release rewrites every file, so this bites only while editing.)

The scan calls small helpers per record and per value. Two costs of numba dominate such
code unless avoided: a call that passes arrays counts references to them on the way in and
out (atomic operations, tens of ns per record), and an index that could be negative gets a
wraparound check that keeps LLVM from merging byte loads. :func:`inlined` pastes a helper
into its caller, :func:`borrowed` gives a loop arrays that need no counting, and :func:`at`
reads a byte by an unsigned index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic
from numba.np.numpy_support import carray

_carray: Any = carray  # untyped for mypy; numba compiles the call


def jit(fn: Callable[..., Any], *, inline: Literal["never", "always"] = "never") -> Any:
    """``numba.njit`` with an on-disk cache, or without one where no cache dir is writable."""
    try:
        return numba.njit(cache=True, nogil=True, inline=inline)(fn)
    except (RuntimeError, OSError):  # numba: "no locator available" for a read-only tree
        return numba.njit(nogil=True, inline=inline)(fn)


def inlined(fn: Callable[..., Any]) -> Any:
    """:func:`jit`, and numba pastes the function into each caller: for the small helpers
    the scan calls per record or per value, so LLVM optimises them with the loop."""
    return jit(fn, inline="always")


def _data_of(typingctx: Any, arr: Any) -> Any:
    """The address of a C-contiguous array's first element (a numba intrinsic)."""
    if not isinstance(arr, types.Array) or arr.layout != "C":
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return context.make_array(arr)(context, builder, value=args[0]).data

    return types.CPointer(arr.dtype)(arr), codegen  # type: ignore[no-untyped-call]


_data: Any = intrinsic(_data_of)


@inlined
def borrowed(arr: np.ndarray) -> np.ndarray:  # pragma: no cover
    """A view of ``arr`` (C-contiguous) that owns nothing, so numba counts no references to
    it: for the arrays of a hot loop, valid while the caller holds ``arr``."""
    return _carray(_data(arr), arr.shape)  # type: ignore[no-any-return]


@inlined
def at(buf: np.ndarray, i: int) -> np.uint8:  # pragma: no cover
    """``buf[i]`` for ``0 <= i < buf.size``. An unsigned index spares the check numba makes
    for a negative one, which keeps LLVM from merging neighbouring byte loads into one
    word load: the byte reads of the hot loops go through here (twice as fast)."""
    return np.uint8(buf[np.uint64(i)])


@inlined
def read_u32(buf: np.ndarray, pos: int) -> np.int64:  # pragma: no cover
    """Little-endian uint32 at ``buf[pos]``."""
    out = np.uint64(0)
    for k in range(4):
        out |= np.uint64(at(buf, pos + k)) << np.uint64(8 * k)
    return np.int64(out)


@inlined
def read_u64(buf: np.ndarray, pos: int) -> np.uint64:  # pragma: no cover
    """Little-endian uint64 at ``buf[pos]``."""
    out = np.uint64(0)
    for k in range(8):
        out |= np.uint64(at(buf, pos + k)) << np.uint64(8 * k)
    return out
