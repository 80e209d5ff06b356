"""Numpy arrays read from files people did not write (a PyTorch/XLA bundle's `.npy` files, the
members of an `.npz` of inputs): the size the header declares is checked against the bytes the
file holds and the memory available before anything is allocated, so a header declaring
terabytes is an error naming the file, never a `MemoryError` or the process killed."""

from __future__ import annotations

import math
import os
import sys
from typing import Optional

import numpy as np

from shlo2jax.errors import LoadError

_READ_CHUNK = 64 << 20


def available_memory() -> Optional[int]:
    """Bytes the system can give this process now without swapping (None where unknown)."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def read_npy(stream, size: int, where: str, error: type = LoadError) -> np.ndarray:
    """The array of the `.npy` data `stream` holds (`size` bytes from its position): an
    `error` naming `where` for data that is not a plain `.npy` array, that holds fewer bytes
    than its header declares, or that would not fit in the memory available."""
    try:
        version = np.lib.format.read_magic(stream)
        # (version 3.0 is 2.0 with a UTF-8 header: the fields numpy writes are ASCII)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran_order, dtype = read_header(stream)
    except Exception as e:  # noqa: BLE001 - numpy's header parser raises what its tokenizer does
        raise error(f"{where}: not a numpy .npy array: {type(e).__name__}: {e}") from None
    if dtype.hasobject:
        raise error(f"{where}: an array of Python objects ({dtype}), which would need pickle")
    # numpy's header parser takes any tuple of ints: (-1,) would reach np.empty
    if any(d < 0 for d in shape):
        raise error(f"{where}: its header declares a negative dimension (shape {shape})")
    declared = math.prod(shape) * dtype.itemsize
    present = size - stream.tell()
    if declared > present:
        raise error(f"{where}: its header declares {_array_text(shape, dtype)} "
                    f"({declared:,} bytes), the file holds {max(present, 0):,} bytes of data")
    free = available_memory()
    if free is not None and declared > free:
        raise error(f"{where}: {_array_text(shape, dtype)} is {declared:,} bytes, more than "
                    f"the {free:,} bytes of memory available")
    flat = np.empty(math.prod(shape), dtype)
    view, filled = memoryview(flat.view(np.uint8).reshape(-1)), 0
    while filled < declared:
        n = stream.readinto(view[filled:filled + _READ_CHUNK])
        if not n:
            raise error(f"{where}: the data ends after {filled:,} of {declared:,} bytes")
        filled += n
    return flat.reshape(shape, order="F" if fortran_order else "C")


def _array_text(shape, dtype) -> str:
    return f"{dtype}[{','.join(map(str, shape))}]"
