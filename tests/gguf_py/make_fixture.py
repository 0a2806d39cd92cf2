#!/usr/bin/env python3
"""Writes a GGUF fixture with gguf-py (PyPI `gguf`), an implementation
independent of glmw, for tests/gguf_py_crosscheck.rs.

Usage: make_fixture.py OUT_DIR

OUT_DIR/fixture.gguf   arch "llama"; one metadata key per value type (and
                       typed / nested arrays); one {512, 3} tensor per ggml
                       type in TYPES plus a 3-D F32 tensor.
OUT_DIR/metadata.json  every key in file order, one per line, as typed nodes:
                       {"type": T, "value": V} with "elem" added for arrays;
                       arrays of arrays hold typed nodes, other arrays raw
                       JSON scalars. f32 values are written as the f64 repr of
                       the exact f32, so parsing them as f32 is exact.
OUT_DIR/tensors.txt    "name type_id ne0,ne1,..." per tensor, in file order.
OUT_DIR/<name>.f32     gguf-py's dequantization of the tensor (raw LE f32).
OUT_DIR/<name>.src.f32 the input gguf-py quantized, for the types glmw claims
                       byte-exact quantization for (see EXACT_QUANT).

Exit status 3 means the gguf package is missing.
"""

import json
import os
import sys

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFValueType as VT
    from gguf import quants
except ImportError as e:  # the Rust test turns this into a failure
    sys.stderr.write(f"cannot import gguf-py ({e}); install it with: pip install gguf\n")
    sys.exit(3)

TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K,
         Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.IQ4_NL, Q.IQ4_XS]
# glmw's quantize_into reproduces these bytes exactly.
EXACT_QUANT = {Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0}
# Byte offsets of the f16 scale fields in one block, for types gguf-py can
# only decode: random blocks get valid, finite scales there.
SCALE_FIELDS = {Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2],
                Q.Q6_K: [208], Q.IQ4_NL: [0], Q.IQ4_XS: [0], Q.Q4_0: [0],
                Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0]}
VT_NAME = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16",
           VT.UINT32: "u32", VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool",
           VT.STRING: "string", VT.ARRAY: "array", VT.UINT64: "u64",
           VT.INT64: "i64", VT.FLOAT64: "f64"}
ROWS, COLS = 3, 512


def f32(v):
    """The Python float equal to v rounded to f32 (what struct 'f' stores)."""
    return float(np.float32(v))


def add_metadata(w):
    w.add_string("general.name", "gguf-py crosscheck fixture")
    w.add_custom_alignment(64)  # also exercises a non-default alignment
    w.add_uint8("test.u8", 255)
    w.add_int8("test.i8", -128)
    w.add_uint16("test.u16", 65535)
    w.add_int16("test.i16", -32768)
    w.add_uint32("test.u32", 4294967295)
    w.add_int32("test.i32", -2147483648)
    w.add_float32("test.f32", f32(3.14159265))
    w.add_float32("test.f32_neg_zero", -0.0)
    w.add_float32("test.f32_subnormal", f32(1e-45))
    w.add_bool("test.bool_true", True)
    w.add_bool("test.bool_false", False)
    w.add_string("test.string", 'h\u00e9llo "w\u00f6rld"\n\t\\ \U0001f980 \x01')
    # add_string() drops empty strings; the format allows them.
    w.add_key_value("test.string_empty", "", VT.STRING)
    w.add_uint64("test.u64", 2**64 - 1)
    w.add_int64("test.i64", -2**63)
    w.add_float64("test.f64", 1.0 / 3.0)
    w.add_float64("test.f64_big", -1.5e300)
    w.add_key_value("test.arr_u32", [0, 1, 4294967295], VT.ARRAY, sub_type=VT.UINT32)
    w.add_array("test.arr_str", ["a", "", "\u00df\u6f22\u5b57"])
    w.add_key_value("test.arr_u8", [0, 7, 255], VT.ARRAY, sub_type=VT.UINT8)
    w.add_key_value("test.arr_i16", [-32768, 0, 32767], VT.ARRAY, sub_type=VT.INT16)
    w.add_key_value("test.arr_f32", [f32(0.1), f32(-2.5e-3), 0.0], VT.ARRAY, sub_type=VT.FLOAT32)
    w.add_key_value("test.arr_bool", [True, False, True], VT.ARRAY, sub_type=VT.BOOL)
    w.add_key_value("test.arr_u64", [2**64 - 1, 0], VT.ARRAY, sub_type=VT.UINT64)
    w.add_key_value("test.arr_i64", [-2**63, 2**63 - 1], VT.ARRAY, sub_type=VT.INT64)
    w.add_key_value("test.arr_f64", [0.1, -1e-300], VT.ARRAY, sub_type=VT.FLOAT64)
    # gguf-py writes nested arrays (inner element types are inferred: Python
    # int -> i32, str -> string, float -> f32). It rejects empty arrays, so no
    # empty inner array here.
    w.add_array("test.arr_arr", [[1, -2, 3], ["x", "yz"], [[4], [5, 6]]])


def node(val, vtype, sub_type=None):
    """A typed JSON node for a value as gguf-py serialises it."""
    if vtype != VT.ARRAY:
        if vtype == VT.FLOAT32:
            val = f32(val)
        return {"type": VT_NAME[vtype], "value": val}
    elem = sub_type if sub_type is not None else VT.get_type(val[0])
    if elem == VT.ARRAY:
        items = [node(v, VT.ARRAY) for v in val]
    elif elem == VT.FLOAT32:
        items = [f32(v) for v in val]
    else:
        items = list(val)
    return {"type": "array", "elem": VT_NAME[elem], "value": items}


def source_rows(rng, qtype):
    """3 x 512 f32 inputs: Gaussian, small with outliers, and edge cases."""
    x = np.empty((ROWS, COLS), dtype=np.float32)
    x[0] = rng.standard_normal(COLS)
    x[1] = rng.standard_normal(COLS) * 0.02
    x[1, ::37] *= 50.0
    e = rng.standard_normal(COLS).astype(np.float32)
    e[0:32] = 0.0                                # all-zero block
    e[32:64] = -0.75                             # constant block
    e[64:96] = np.arange(32) - 15.5              # ties at half steps
    e[96:128] = (np.arange(32) - 16) * 0.25      # on the Q4_0 grid
    e[128:160] *= 1e4                            # large
    e[160:192] = np.where(np.arange(32) % 2 == 0, 3.0, -3.0)  # |max| tie, + first
    e[192:224] = np.where(np.arange(32) % 2 == 0, -3.0, 3.0)  # |max| tie, - first
    e[224:256] = (np.arange(32) - 16) * (127.0 / 16) + 0.5    # Q8_0 roundf ties
    if qtype in (Q.F32, Q.F16, Q.BF16):
        special = [np.inf, -np.inf, -0.0, np.nan, 65504.0, 65520.0, 1e-8, 6e-8,
                   2.0**-24, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 3e38,
                   np.float32(np.frombuffer(np.uint32(0x3F808000).tobytes(), np.float32)[0]),
                   np.float32(np.frombuffer(np.uint32(0x3F818000).tobytes(), np.float32)[0])]
        e[256:256 + len(special)] = special
        if qtype == Q.F32:
            e[300] = np.frombuffer(np.uint32(0x00000001).tobytes(), np.float32)[0]
        if qtype == Q.BF16:
            # signalling NaN: ggml and gguf-py make it quiet without rounding
            e[301] = np.frombuffer(np.uint32(0x7F800001).tobytes(), np.float32)[0]
    x[2] = e
    return x


def random_blocks(rng, qtype):
    """Random raw blocks with finite f16 scales, plus a few special scales."""
    bs, ts = quants.GGML_QUANT_SIZES[qtype]
    nb = ROWS * COLS // bs
    raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    for off in SCALE_FIELDS[qtype]:
        d = (rng.standard_normal(nb) * 0.05).astype(np.float16)
        d[0] = np.float16(0.0)
        d[1 % nb] = np.frombuffer(np.uint16(0x0003).tobytes(), np.float16)[0]  # subnormal
        d[2 % nb] = np.float16(-1.0)
        raw[:, off:off + 2] = d.view(np.uint8).reshape(nb, 2)
    return raw.reshape(ROWS, -1)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: make_fixture.py OUT_DIR\n")
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20240601)
    w = gguf.GGUFWriter(os.path.join(out, "fixture.gguf"), "llama")
    add_metadata(w)

    tensors = []
    for qtype in TYPES:
        name = f"t_{qtype.name.lower()}"
        src = source_rows(rng, qtype)
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # inf/NaN inputs
                raw = quants.quantize(src, qtype)
        except NotImplementedError:
            raw, src = random_blocks(rng, qtype), None
        raw = np.ascontiguousarray(raw).view(np.uint8).reshape(ROWS, -1)
        deq = np.asarray(quants.dequantize(raw, qtype), dtype=np.float32)
        assert deq.shape == (ROWS, COLS), (qtype, deq.shape)
        deq.astype("<f4").tofile(os.path.join(out, f"{name}.f32"))
        if src is not None and qtype in EXACT_QUANT:
            src.astype("<f4").tofile(os.path.join(out, f"{name}.src.f32"))
        w.add_tensor(name, raw, raw_dtype=qtype)
        tensors.append((name, int(qtype), [COLS, ROWS]))
    # A 3-D tensor: GGUF lists dims fastest first, numpy shapes slowest first.
    cube = np.arange(2 * 4 * 32, dtype=np.float32).reshape(2, 4, 32) - 100.0
    w.add_tensor("t_cube", cube)
    cube.astype("<f4").tofile(os.path.join(out, "t_cube.f32"))
    tensors.append(("t_cube", int(Q.F32), [32, 4, 2]))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # Everything the writer serialised, in its order (general.architecture
    # included), so the listing cannot drift from the file.
    lines = []
    for key, val in w.kv_data[0].items():
        n = node(val.value, val.type, val.sub_type)
        lines.append(json.dumps({"key": key, **n}, ensure_ascii=False))
    with open(os.path.join(out, "metadata.json"), "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(lines) + "\n]\n")
    with open(os.path.join(out, "tensors.txt"), "w") as f:
        for name, tid, dims in tensors:
            f.write(f"{name} {tid} {','.join(map(str, dims))}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
