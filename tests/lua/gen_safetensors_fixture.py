#!/usr/bin/python3
# gen_safetensors_fixture.py: writes tests/lua/data/fixture.safetensors, a small checkpoint in
# the safetensors format made from PyTorch tensors, for tests/lua/test_io.lua (moonshard must
# load it, and saving the same tensors must give the same bytes). The `safetensors` package is
# not installed here, so the file is written by hand exactly as its reference implementation
# writes one: u64 little-endian header length; compact JSON with "__metadata__" first, then the
# tensors sorted by dtype alignment (largest first) and then by name, data offsets in that
# order; the header padded with spaces to a multiple of 8; the raw little-endian bytes.
# Run from the repo root with /usr/bin/python3 (torch 1.13); needs nothing else.
import json
import os
import struct

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "fixture.safetensors")

# The reference library's Dtype enum, in its order (alignment ascending).
ORDER = ["BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16", "I32", "U32", "F32", "F64",
         "I64", "U64"]
NAMES = {torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16", torch.float16: "F16",
         torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}

# Values every dtype holds exactly, so moonshard can build the same tensors from Lua numbers.
TENSORS = {
    "a.f32": torch.tensor([[1.5, -2.0, 0.25], [3.0, 4.0, 5.0]], dtype=torch.float32),
    "b.f64": torch.tensor([0.1, -1e300, 3.0], dtype=torch.float64),
    "c.bf16": torch.tensor([1.0, -2.5, 3.0, 0.5], dtype=torch.bfloat16),
    "d.f16": torch.tensor([[0.5, -1.0], [65504.0, 0.0]], dtype=torch.float16),
    "e.i64": torch.tensor([-(2 ** 62), 0, 7], dtype=torch.int64),
    "f.i32": torch.tensor([1, -2, 2147483647], dtype=torch.int32),
    "g.u8": torch.tensor([0, 255, 7], dtype=torch.uint8),
    "h.bool": torch.tensor([True, False, True]),
    "scalar": torch.tensor(2.5, dtype=torch.float32),
    "empty": torch.zeros(0, 4, dtype=torch.float32),
    "t.transposed": torch.arange(6, dtype=torch.float32).reshape(2, 3).t(),  # written contiguous
}
METADATA = {"format": "pt", "note": "h\u00e9llo \"quoted\"\n\ttab \\ \u0001"}


def raw_bytes(t):
    t = t.contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)  # numpy has no bfloat16; the bits are what is stored
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def serialize(tensors, metadata):
    items = sorted(tensors.items(), key=lambda kv: (-ORDER.index(NAMES[kv[1].dtype]), kv[0]))
    header, offset, data = {}, 0, b""
    if metadata is not None:
        header["__metadata__"] = dict(sorted(metadata.items()))
    for name, t in items:
        b = raw_bytes(t)
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        data += b
    # serde_json's compact form: no spaces, UTF-8 kept, control characters escaped as json does
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


if __name__ == "__main__":
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(serialize(TENSORS, METADATA))
    print("wrote", OUT)
