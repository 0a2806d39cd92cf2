"""A small self-contained GGUF v3 writer and reader and the Q4_0 / Q8_0 block
codecs, in numpy only (the machine that trains has no `gguf` package).

Format: model-spec §1 (little-endian; header, metadata, tensor table, data
section aligned to 32 bytes, every tensor blob padded to 32). Quantizers
follow ggml's quantize_row_q4_0_ref / quantize_row_q8_0_ref (and glmw's
src/quant/legacy.rs) operation for operation in f32; decoders follow
dequantize_row_*. What matters for the perplexity gate is that dequantize()
here equals glmw's decoding of the same bytes, which it does exactly.
"""

import struct

import numpy as np

ALIGN = 32
F32, Q4_0, Q8_0 = 0, 2, 8
TYPE_NAME = {F32: "F32", Q4_0: "Q4_0", Q8_0: "Q8_0"}
QK = 32

# GGUF metadata value types
_VT = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7, "str": 8,
       "arr": 9, "u64": 10, "i64": 11, "f64": 12}
_PACK = {"u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i", "f32": "<f",
         "bool": "<?", "u64": "<Q", "i64": "<q", "f64": "<d"}


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(ty, v):
    if ty == "str":
        return _str(v)
    if ty.startswith("arr_"):
        et = ty[4:]
        out = [struct.pack("<IQ", _VT[et], len(v))]
        if et == "str":
            out += [_str(s) for s in v]
        else:
            out.append(np.asarray(v, dtype=np.dtype(_PACK[et][1:]).newbyteorder("<")).tobytes())
        return b"".join(out)
    return struct.pack(_PACK[ty], v)


def _type_id(ty):
    return _VT["arr"] if ty.startswith("arr_") else _VT[ty]


# ------------------------------------------------------------------ codecs

def quantize_q4_0(x):
    """f32 array (last dim a multiple of 32) -> raw Q4_0 bytes (18 per block)."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, QK)
    imax = np.abs(blocks).argmax(axis=1)  # first index on ties, as ggml's strict <
    mx = blocks[np.arange(len(blocks)), imax]
    d = (mx / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    # f32 multiply, then f32 add of 8.5, then truncation toward zero (C cast).
    v = (blocks * inv[:, None]).astype(np.float32) + np.float32(8.5)
    q = np.minimum(np.trunc(v).astype(np.int32), 15).astype(np.uint8)
    qs = q[:, :16] | (q[:, 16:] << 4)
    out = np.empty((len(blocks), 18), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = qs
    return out.tobytes()


def dequantize_q4_0(raw, shape):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 18)
    d = b[:, :2].copy().view("<f2").astype(np.float32)
    qs = b[:, 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int32) - 8
    return (q.astype(np.float32) * d).reshape(shape)


def quantize_q8_0(x):
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, QK)
    amax = np.abs(blocks).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = (blocks * inv[:, None]).astype(np.float32).astype(np.float64)
    q = np.trunc(v + np.copysign(0.5, v)).astype(np.int8)  # roundf: half away from zero
    out = np.empty((len(blocks), 34), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def dequantize_q8_0(raw, shape):
    b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
    d = b[:, :2].copy().view("<f2").astype(np.float32)
    q = b[:, 2:].view(np.int8).astype(np.float32)
    return (q * d).reshape(shape)


def encode(x, ggml_type):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if ggml_type == F32:
        return x.astype("<f4").tobytes()
    if x.shape[-1] % QK:
        raise ValueError(f"last dim {x.shape[-1]} is not a multiple of {QK}")
    return {Q4_0: quantize_q4_0, Q8_0: quantize_q8_0}[ggml_type](x)


def decode(raw, ggml_type, shape):
    if ggml_type == F32:
        return np.frombuffer(raw, dtype="<f4").reshape(shape).astype(np.float32)
    return {Q4_0: dequantize_q4_0, Q8_0: dequantize_q8_0}[ggml_type](raw, shape)


# ------------------------------------------------------------------ writer

def write_gguf(path, metadata, tensors):
    """metadata: [(key, type, value)] with type u32/i32/f32/bool/str/arr_str/
    arr_i32/...; tensors: [(name, array, ggml_type)] where array is numpy in
    C order, so its shape reversed is the GGUF ne (ne0 = last axis).
    Returns {name: raw bytes} of what was written."""
    blobs = [(name, np.asarray(a).shape, ty, encode(a, ty)) for name, a, ty in tensors]
    head = [b"GGUF", struct.pack("<IQQ", 3, len(blobs), len(metadata))]
    for k, ty, v in metadata:
        head += [_str(k), struct.pack("<I", _type_id(ty)), _value(ty, v)]
    off = 0
    for name, shape, ty, raw in blobs:
        ne = list(reversed(shape))
        head += [_str(name), struct.pack("<I", len(ne)), struct.pack(f"<{len(ne)}Q", *ne),
                 struct.pack("<IQ", ty, off)]
        off += -(-len(raw) // ALIGN) * ALIGN
    h = b"".join(head)
    with open(path, "wb") as f:
        f.write(h + b"\0" * (-len(h) % ALIGN))
        for _, _, _, raw in blobs:
            f.write(raw + b"\0" * (-len(raw) % ALIGN))
    return {name: raw for name, _, _, raw in blobs}


# ------------------------------------------------------------------ reader

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
           12: "<d"}
_BLOCK = {F32: (1, 4), Q4_0: (32, 18), Q8_0: (32, 34)}


def read_gguf(path):
    """(metadata {key: value}, {name: f32 numpy array in C order}) for files
    whose tensors are F32, Q4_0 or Q8_0 (what write_gguf makes), plus
    {name: type id}."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("<Q")
        s = buf[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(_SCALAR[t])

    if buf[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 4
    version, n_t, n_kv = take("<I"), take("<Q"), take("<Q")
    if version != 3:
        raise ValueError(f"{path}: GGUF version {version}")
    md = {}
    for _ in range(n_kv):
        k = string()
        md[k] = value(take("<I"))
    infos = []
    for _ in range(n_t):
        name = string()
        nd = take("<I")
        ne = [take("<Q") for _ in range(nd)]
        infos.append((name, ne, take("<I"), take("<Q")))
    align = md.get("general.alignment", ALIGN)
    base = pos + (-pos % align)
    tensors, types = {}, {}
    for name, ne, ty, off in infos:
        if ty not in _BLOCK:
            raise ValueError(f"{name}: ggml type {ty} is not F32/Q4_0/Q8_0")
        n = int(np.prod(ne))
        bs, bb = _BLOCK[ty]
        raw = buf[base + off: base + off + n // bs * bb]
        tensors[name] = decode(raw, ty, tuple(reversed(ne)))
        types[name] = ty
    return md, tensors, types
