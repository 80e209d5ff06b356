"""shlo2jax/npy.py: `.npy` data read only after its declared size is checked against the bytes
present and the memory available; what numpy writes reads back exactly."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from shlo2jax import npy
from shlo2jax.errors import InputError, LoadError
from shlo2jax.tools.inputs import read_npz


def _saved(array, **kwargs) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, **kwargs)
    return buf.getvalue()


def _read(data: bytes, **kwargs):
    return npy.read_npy(io.BytesIO(data), len(data), "x.npy", **kwargs)


def _header_only(shape, descr="<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    return buf.getvalue()


@pytest.mark.parametrize("array", [
    np.arange(24, dtype=np.float32).reshape(2, 3, 4),
    np.asfortranarray(np.arange(12.0).reshape(3, 4)),
    np.array(7, np.int64),
    np.zeros((0, 5), np.int8),
    np.array([True, False, True]),
    np.arange(6, dtype=np.complex64) * 1j,
], ids=["f32", "fortran", "0-d", "empty", "bool", "c64"])
def test_what_numpy_writes_reads_back_exactly(array):
    value = _read(_saved(array))
    assert value.dtype == array.dtype and value.shape == array.shape
    np.testing.assert_array_equal(value, array)
    assert value.flags.writeable and value.flags.f_contiguous == array.flags.f_contiguous


def test_a_version_2_header_reads():
    buf = io.BytesIO()
    array = np.arange(5, dtype=np.int32)
    np.lib.format.write_array(buf, array, version=(2, 0))
    np.testing.assert_array_equal(_read(buf.getvalue()), array)


def test_a_header_declaring_more_than_the_file_holds_is_refused_before_allocating():
    data = _header_only((10**12,)) + b"\0" * 16
    with pytest.raises(LoadError, match=r"declares float32\[1000000000000\] "
                                        r"\(4,000,000,000,000 bytes\), the file holds 16"):
        _read(data)


def test_more_than_the_memory_available_is_refused(monkeypatch):
    monkeypatch.setattr(npy, "available_memory", lambda: 1000)
    with pytest.raises(LoadError, match="more than the 1,000 bytes of memory available"):
        _read(_saved(np.zeros(1000, np.float32)))
    assert _read(_saved(np.zeros(100, np.float32))).shape == (100,)


@pytest.mark.parametrize("shape", [(-1,), (-2, -3), (4, -1)])
def test_a_negative_dimension_is_refused(shape):
    """numpy's header parser takes any tuple of ints; found by `shlo2jax mutate --kinds bundle`
    (a ValueError from np.empty; two negatives multiply to a positive size)."""
    data = _header_only(shape) + b"\0" * 64
    with pytest.raises(LoadError, match=r"negative dimension \(shape \(" + str(shape[0])):
        _read(data)


@pytest.mark.parametrize("data, what", [
    (b"\x93NUMPY\x01\x00\xff", "not a numpy .npy array"),
    (b"not numpy at all", "not a numpy .npy array"),
    (_header_only((3,), "|O"), "Python objects"),
])
def test_what_is_not_a_plain_array_is_refused(data, what):
    with pytest.raises(InputError, match=what):
        _read(data, error=InputError)


def test_an_npz_of_inputs_declaring_terabytes_is_an_input_error(tmp_path):
    path = tmp_path / "inputs.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("x.npy", _header_only((10**12,)) + b"\0" * 16)
    with pytest.raises(InputError, match="'x': its header declares"):
        read_npz(str(path))
    good = tmp_path / "good.npz"
    np.savez_compressed(good, arg_0=np.ones((2, 3), np.float32), **{"1": np.arange(4)})
    arrays = read_npz(str(good))
    assert set(arrays) == {"arg_0", "1"} and arrays["1"].tolist() == [0, 1, 2, 3]
