"""Decoding raw tensor bytes to numpy, float8 and e8m0 included."""

from __future__ import annotations

from eaglehub.errors import EaglehubError
from eaglehub.io.stformat import DTYPES


def _fp8_table(exp_bits: int, man_bits: int, bias: int, kind: str):
    """float32 value of every byte of an 8-bit float format, as a ``[256]`` numpy array.

    ``kind``: ``"fn"`` (OCP e4m3fn: no inf, NaN = all exponent and mantissa bits set), ``"ieee"``
    (e5m2: exponent all ones is inf or NaN), ``"fnuz"`` (no inf, no -0, NaN = 0x80). Subnormals at
    exponent 0. Formats as torch defines them (tested against ``tensor.view(fp8).float()``).
    """
    import numpy as np

    out = np.empty(256, dtype=np.float32)
    top_e, top_m = (1 << exp_bits) - 1, (1 << man_bits) - 1
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e, m = (b >> man_bits) & top_e, b & top_m
        if (
            (kind == "fnuz" and b == 0x80)
            or (kind == "fn" and e == top_e and m == top_m)
            or (kind == "ieee" and e == top_e and m)
        ):
            out[b] = np.nan
        elif kind == "ieee" and e == top_e:
            out[b] = sign * np.inf
        elif e == 0:
            out[b] = sign * (m / (1 << man_bits)) * 2.0 ** (1 - bias)
        else:
            out[b] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


def _e8m0_table():
    """float32 value of every float8_e8m0fnu byte: ``2**(b - 127)``, 0xFF is NaN (unsigned, no zero)."""
    import numpy as np

    out = np.ldexp(np.float32(1.0), np.arange(255) - 127).astype(np.float32)  # 2**127 is the largest
    out = np.append(out, np.float32(np.nan))
    return out


#: safetensors code -> builder of its 256-entry float32 lookup table (8-bit floats numpy lacks).
_FP8_TABLES = {
    "F8_E4M3": lambda: _fp8_table(4, 3, 7, "fn"),
    "F8_E5M2": lambda: _fp8_table(5, 2, 15, "ieee"),
    "F8_E4M3FNUZ": lambda: _fp8_table(4, 3, 8, "fnuz"),
    "F8_E5M2FNUZ": lambda: _fp8_table(5, 2, 16, "fnuz"),
    "F8_E8M0": _e8m0_table,
}


_fp8_cache: dict = {}


def fp8_table(code: str):
    """The ``[256]`` float32 lookup table decoding safetensors 8-bit float ``code`` (e.g. ``"F8_E4M3"``).

    Raises: KeyError for a code that is not an 8-bit float.
    """
    if code not in _fp8_cache:
        _fp8_cache[code] = _FP8_TABLES[code]()
    return _fp8_cache[code]


def decode_buffer(buf, st_dtype: str, shape: tuple[int, ...]):
    """Decode the little-endian buffer ``buf`` (bytes-like) of safetensors dtype ``st_dtype`` into a
    numpy array of ``shape``: bool/int/uint/float16/32/64/complex64 as stored; ``BF16`` → float32 by
    a 16-bit shift (exact); 8-bit floats → float32 through :func:`fp8_table` (exact).

    Raises: EaglehubError for types numpy cannot hold (``F4``, ``F6_*``).
    """
    import numpy as np

    dt = DTYPES[st_dtype]
    if dt.numpy:
        return np.frombuffer(buf, dtype=np.dtype(dt.numpy)).reshape(shape)
    if st_dtype == "BF16":
        return (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    if st_dtype in _FP8_TABLES:
        return fp8_table(st_dtype)[np.frombuffer(buf, dtype=np.uint8)].reshape(shape)
    raise EaglehubError(
        f"cannot decode {st_dtype} tensors to numpy",
        hint="only byte-sized dtypes are read; this check needs a wider dtype",
        code="E-INPUT-WEIGHTS",
    )
