"""Host-side (torch) helpers that prepare quantized weights for the decoders: random 4-bit weights with their
reference, packing of low-bit values into bytes, and the interleaved order the batch decoders read."""

from __future__ import annotations


def gen_quant4(k: int, n: int, groupsize: int = -1):
    """Random float16 weights (k, n) quantized symmetrically to 4 bits per group of `groupsize` rows (all k if -1).

    Returns (w, linear, s, q): the original weights; a torch Linear whose weight is the dequantized matrix
    (transposed, as Linear stores it); the per-group scales (k // groupsize, n), max|w| / 8; and the signed codes
    q = clamp(round(w / s) + 8, 0, 16) - 8, so that the dequantized matrix is q * s."""
    import torch

    w = torch.randn((k, n), dtype=torch.half)
    group = k if groupsize == -1 else groupsize
    grouped = w.reshape(k // group, group, n)
    s = grouped.abs().amax(dim=1, keepdim=True) * (2 / 16)
    q = (torch.round(grouped / s).int() + 8).clamp(0, 16)
    ref = ((q - 8).half() * s).reshape(k, n)
    linear = torch.nn.Linear(k, n, bias=False)
    linear.weight.data = ref.t()
    return w, linear, s.reshape(k // group, n).contiguous(), (q - 8).reshape(k, n)


def general_compress(lowprecision_weight, source_bits: int = 4, storage_dtype=None):
    """Pack the last dimension's values, 8 // source_bits per byte: value j * per + i goes to bits
    [i * source_bits, (i + 1) * source_bits) of byte j (only its low source_bits bits are kept)."""
    import torch

    per = 8 // source_bits
    values = lowprecision_weight.to(torch.int64) & ((1 << source_bits) - 1)
    values = values.reshape(*values.shape[:-1], values.shape[-1] // per, per)
    shifts = torch.arange(per, dtype=torch.int64, device=values.device) * source_bits
    packed = (values << shifts).sum(dim=-1)
    packed = torch.where(packed > 127, packed - 256, packed).to(torch.int8)
    return packed.to(storage_dtype if storage_dtype is not None else torch.int8)


def interleave_weight(qweight, nbits: int = 4, target_dtype: str = "float16"):
    """Reorder the nbits fields of each 32-bit word of `qweight` (int8 bytes, a multiple of 4 per row) into the order
    the batch decoders read: with lanes of `stride` bits (16 for float16, 8 for int8), field f moves to lane
    f % lanes, slot f // lanes. For 2-bit fields to float16 the word's middle bytes are then swapped (the decoder
    reads two bytes as the low and high halves). Returns int8 bytes of the same shape."""
    import torch

    if target_dtype not in ("float16", "int8"):
        raise ValueError(f"interleave_weight: target_dtype must be float16 or int8, got {target_dtype!r}")
    if nbits == 1:
        raise NotImplementedError("interleave_weight: 1-bit fields have no MUSA batch decoder (see get_lop3_intrin_group)")
    words = qweight.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    stride = 16 if target_dtype == "float16" else 8
    lanes, mask = 32 // stride, (1 << nbits) - 1
    out = torch.zeros_like(words)
    for f in range(32 // nbits):
        out |= ((words >> (nbits * f)) & mask) << ((f % lanes) * stride + (f // lanes) * nbits)
    if nbits == 2 and target_dtype == "float16":
        out = (out & 0xFF0000FF) | ((out & 0x0000FF00) << 8) | ((out & 0x00FF0000) >> 8)
    out = torch.where(out >= 1 << 31, out - (1 << 32), out).to(torch.int32)
    return out.view(torch.int8).reshape(qweight.shape)
