"""Compare the GPU's outputs of the bundle's kernels with the simulator's (docs/SIM_VS_SILICON.md).

    python tools/silicon/compare.py GPU_OUT_DIR [--bundle tools/silicon/bundle] [--report FILE] [--json FILE]

GPU_OUT_DIR holds what tools/silicon/run.sh wrote (<kernel>.<arg>.bin, status.txt; unpack gpu_outputs.tar.gz
first). Each output is compared as bundle/meta.json says:

    exact        bit for bit (integer results, shuffles, copies, reductions, order-independent atomics)
    math         per row (one function): bits equal, or else the distance in units in the last place of the output
                 type (a NaN against a NaN counts as equal, with its payload noted; a NaN against a number, or -0
                 against +0, is a mismatch of its own kind); whether the row should be bit-exact is EXACT_ROWS
    cast         per row (one conversion, result bits as int32): bit for bit, with float-to-integer conversions
                 of NaN or of values outside the target's range (undefined in C) counted apart
    sum          order-dependent floating-point atomic sums: within rtol of each other
    permutation  atomic tickets: both a permutation of the same values

Exit status 1 when a row expected to be bit-exact differs (or a kernel did not run), else 0.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

np.seterr(all="ignore")  # NaN and infinity inputs are the point

HERE = Path(__file__).resolve().parent

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": np.uint16, "int32": np.int32, "int8": np.int8,
      "int64": np.int64, "int16": np.int16}
BITS = {"float32": 32, "float16": 16, "bfloat16": 16}

# Rows IEEE 754 defines to one correctly rounded result (or that are exact), on any conforming implementation.
# Everything else is a library function whose accuracy is the implementation's (ulp-bounded).
EXACT_ROWS = {"add", "sub", "mul", "div", "sqrt", "neg", "abs", "floor", "ceil", "trunc", "round", "nearbyint",
              "square", "max", "min", "fmod", "ieee_fsqrt_rn", "ieee_fsqrt_rz", "ieee_frcp_rn", "ieee_frcp_ru",
              "ieee_frcp_rd", "mul_add", "mul_sub", "sub_mul", "two_products", "ieee_fmaf_rn"} | {f"ieee_{op}_{m}" for op in ("add", "sub", "mul", "fdiv", "fmaf")
                                           for m in ("rn", "rz", "ru", "rd")}

# a*b+c: a compiler may contract it into one fused multiply-add (nvcc's -fmad=true, clang's -ffp-contract=fast):
# judged on the -fmad=false build when run.sh made one.
CONTRACTIBLE_ROWS = {"mul_add", "mul_sub", "sub_mul", "two_products"}


def load(path: Path, dtype: str, shape) -> np.ndarray:
    return np.fromfile(path, dtype=NP[dtype]).reshape(shape)


def as_float64(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def raw_bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """The bit patterns, as int64 of the type's width (signed)."""
    if dtype == "float32":
        return x.view(np.int32).astype(np.int64)
    if dtype in ("float16", "bfloat16"):
        return x.view(np.int16).astype(np.int64)
    return x.astype(np.int64)


def ordered(bits: np.ndarray, width: int) -> np.ndarray:
    """Map float bit patterns (signed ints) to integers whose difference counts representable values (+0 == -0)."""
    sign_min = -(1 << (width - 1))
    return np.where(bits >= 0, bits, sign_min - bits)


def is_nan(x: np.ndarray, dtype: str) -> np.ndarray:
    return np.isnan(as_float64(x, dtype))


def fmt(v: float) -> str:
    return f"{v:.9g}"


def compare_math_row(sim: np.ndarray, gpu: np.ndarray, dtype: str, inputs: list) -> dict:
    """Distances between two rows of a floating-point output."""
    sb, gb = raw_bits(sim, dtype), raw_bits(gpu, dtype)
    sn, gn = is_nan(sim, dtype), is_nan(gpu, dtype)
    both_nan = sn & gn
    one_nan = sn ^ gn
    width = BITS[dtype]
    ulp = np.abs(ordered(sb, width) - ordered(gb, width))
    ulp = np.where(both_nan | one_nan, 0, ulp)
    signed_zero = (sb != gb) & (ulp == 0) & ~both_nan & ~one_nan
    differ = ((sb != gb) & ~both_nan) | one_nan
    r = {"n": int(sim.size), "bits_differ": int(differ.sum()), "max_ulp": int(ulp.max()) if ulp.size else 0,
         "ulp_gt_0": int((ulp > 0).sum()), "ulp_gt_1": int((ulp > 1).sum()), "nan_vs_number": int(one_nan.sum()),
         "signed_zero": int(signed_zero.sum()), "nan_payload_differs": int((both_nan & (sb != gb)).sum())}
    # the worst case, with its inputs: the largest ulp distance, else a NaN/number or a signed-zero case
    score = np.where(one_nan, np.iinfo(np.int64).max, ulp) + signed_zero
    if differ.any():
        i = int(np.argmax(score))
        r["example"] = {"inputs": [fmt(float(as_float64(np.asarray(x).reshape(-1)[i:i + 1], dt)[0])) for x, dt in inputs],
                        "sim": fmt(float(as_float64(sim[i:i + 1], dtype)[0])),
                        "gpu": fmt(float(as_float64(gpu[i:i + 1], dtype)[0])),
                        "sim_bits": hex(int(sb[i]) & ((1 << width) - 1)), "gpu_bits": hex(int(gb[i]) & ((1 << width) - 1))}
    return r


CAST_RANGE = {"int32": (-2**31, 2**31 - 1), "int8": (-128, 127)}


def result_is_nan(bits: np.ndarray, dst: str) -> np.ndarray:
    """Whether a cast row's result bits (int32: float32 bits, or 16-bit bits sign-extended) are a NaN of dst."""
    if dst == "float32":
        return (bits & 0x7FFFFFFF) > 0x7F800000
    if dst == "float16":
        return (bits & 0x7FFF) > 0x7C00
    if dst == "bfloat16":
        return (bits & 0x7FFF) > 0x7F80
    return np.zeros(bits.shape, dtype=bool)


def compare_cast_row(sim: np.ndarray, gpu: np.ndarray, src: np.ndarray, src_dtype: str, dst: str) -> dict:
    payload = (sim != gpu) & result_is_nan(sim, dst) & result_is_nan(gpu, dst)
    differ = (sim != gpu) & ~payload
    r = {"n": int(sim.size), "bits_differ": int((sim != gpu).sum()), "nan_payload_differs": int(payload.sum())}
    if payload.any():
        i = int(np.nonzero(payload)[0][0])
        r["nan_payload_example"] = {"sim": hex(int(sim[i]) & 0xFFFFFFFF), "gpu": hex(int(gpu[i]) & 0xFFFFFFFF)}
    if src_dtype in BITS and dst in CAST_RANGE:
        v = as_float64(src, src_dtype)
        lo, hi = CAST_RANGE[dst]
        with np.errstate(invalid="ignore"):
            undefined = np.isnan(v) | (np.trunc(v) < lo) | (np.trunc(v) > hi)
        r["undefined_inputs"] = int(undefined.sum())
        r["differ_in_range"] = int((differ & ~undefined).sum())
        r["differ_undefined"] = int((differ & undefined).sum())
        if (differ & undefined).any():
            idx = np.nonzero(differ & undefined)[0][:4]
            r["undefined_examples"] = [{"input": fmt(float(v[i])), "sim": int(sim[i]), "gpu": int(gpu[i])} for i in idx]
    else:
        r["differ_in_range"] = int(differ.sum())
    if r["differ_in_range"]:
        mask = differ if "undefined_inputs" not in r else (differ & ~undefined)
        i = int(np.nonzero(mask)[0][0])
        r["example"] = {"input": fmt(float(as_float64(src[i:i + 1], src_dtype)[0])) if src_dtype in BITS else int(src[i]),
                        "sim": hex(int(sim[i]) & 0xFFFFFFFF), "gpu": hex(int(gpu[i]) & 0xFFFFFFFF)}
    return r


def compare(gpu_dir: Path, bundle: Path) -> dict:
    meta = json.loads((bundle / "meta.json").read_text())
    results = {}
    for kname, km in meta.items():
        kres = {}
        results[kname] = kres
        ins = [(load(bundle / "data" / f"{kname}.{a['name']}.bin", a["dtype"], a["shape"]), a["dtype"])
               for a in km["args"] if not a["out"]]
        for a in km["args"]:
            if not a["out"]:
                continue
            gpath = gpu_dir / f"{kname}.{a['name']}.bin"
            if not gpath.exists():
                kres[a["name"]] = {"missing": True}
                continue
            sim = load(bundle / "sim" / f"{kname}.{a['name']}.bin", a["dtype"], a["shape"])
            gpu = load(gpath, a["dtype"], a["shape"])
            c = a["compare"]
            mode = c.get("mode", "exact")
            if mode == "math":
                rows = {row: compare_math_row(sim[i], gpu[i], a["dtype"], ins) | {"expect_exact": row in EXACT_ROWS}
                        for i, row in enumerate(c["rows"])}
                nofma = gpu_dir / "nofma" / gpath.name
                if nofma.exists():  # run.sh's second build with -fmad=false: contraction told apart
                    g2 = load(nofma, a["dtype"], a["shape"])
                    for i, row in enumerate(c["rows"]):
                        rows[row]["nofma_bits_differ"] = compare_math_row(sim[i], g2[i], a["dtype"], ins)["bits_differ"]
                kres[a["name"]] = rows
            elif mode == "cast":
                out = {}
                for i, row in enumerate(c["rows"]):
                    s, d = row.split("->")
                    j = ["float32", "float16", "bfloat16", "int32", "int8"].index(s)
                    out[row] = compare_cast_row(sim[i], gpu[i], ins[j][0], s, d)
                kres[a["name"]] = out
            elif mode == "exact":
                sb, gb = raw_bits(sim, a["dtype"]), raw_bits(gpu, a["dtype"])
                if "rows" in c:
                    kres[a["name"]] = {row: {"n": int(sb[i].size), "bits_differ": int((sb[i] != gb[i]).sum())}
                                       for i, row in enumerate(c["rows"])}
                else:
                    kres[a["name"]] = {"n": int(sb.size), "bits_differ": int((sb != gb).sum())}
            elif mode == "sum":
                s64, g64 = as_float64(sim, a["dtype"]), as_float64(gpu, a["dtype"])
                rel = np.abs(s64 - g64) / np.maximum(np.abs(s64), 1e-30)
                kres[a["name"]] = {"n": int(sim.size), "bits_differ": int((raw_bits(sim, a["dtype"]) != raw_bits(gpu, a["dtype"])).sum()),
                                   "max_rel": float(rel.max()), "rtol": c["rtol"], "within": bool(rel.max() <= c["rtol"])}
            elif mode == "permutation":
                kres[a["name"]] = {"n": int(sim.size), "same_values": bool(np.array_equal(np.sort(sim.reshape(-1)), np.sort(gpu.reshape(-1)))),
                                   "bits_differ": int((sim != gpu).sum())}
    return results


def status_lines(gpu_dir: Path) -> list[str]:
    p = gpu_dir / "status.txt"
    return p.read_text().splitlines() if p.exists() else ["(no status.txt)"]


def report(results: dict, gpu_dir: Path) -> tuple[str, bool]:
    lines = ["# Simulator against silicon: comparison", ""]
    env = gpu_dir / "env.txt"
    lines += [f"    {l}" for l in (env.read_text().splitlines() if env.exists() else []) + status_lines(gpu_dir)[:1]]
    lines.append("")
    failed = False
    for kname, kres in results.items():
        lines.append(f"## {kname}")
        for arg, r in kres.items():
            if r.get("missing"):
                lines.append(f"- {arg}: MISSING (the kernel did not run on the GPU)")
                failed = True
                continue
            if "n" in r:  # one whole-output comparison
                extra = ""
                if "max_rel" in r:
                    extra = f", max relative difference {r['max_rel']:.3g} (rtol {r['rtol']}: {'ok' if r['within'] else 'OUT'})"
                    failed |= not r["within"]
                elif "same_values" in r:
                    extra = f", same multiset of values: {r['same_values']}"
                    failed |= not r["same_values"]
                else:
                    failed |= r["bits_differ"] > 0
                lines.append(f"- {arg}: {r['bits_differ']} of {r['n']} differ in bits{extra}")
                continue
            lines.append(f"- {arg}:")
            lines.append("")
            lines.append("  | row | n | bits differ | max ulp | >1 ulp | NaN vs number | +-0 | NaN payload | detail |")
            lines.append("  |---|---|---|---|---|---|---|---|---|")
            for row, rr in r.items():
                detail = ""
                if "example" in rr:
                    detail = json.dumps(rr["example"]).replace("|", "/")
                if rr.get("nan_payload_example"):
                    detail += f" NaN payloads differ: {rr['nan_payload_differs']}, e.g. " + json.dumps(rr["nan_payload_example"])
                if "differ_undefined" in rr and rr["differ_undefined"]:
                    detail += f" undefined-in-C inputs differ: {rr['differ_undefined']} of {rr['undefined_inputs']}, e.g. " + \
                              json.dumps(rr.get("undefined_examples", [])[:2])
                bad = rr.get("differ_in_range", rr["bits_differ"])
                if row in CONTRACTIBLE_ROWS and rr.get("nofma_bits_differ") is not None:
                    detail = f"with -fmad=false: {rr['nofma_bits_differ']} differ (the rest is contraction into an fma) " + detail
                    bad = rr["nofma_bits_differ"]
                expect = rr.get("expect_exact", "max_ulp" not in rr)
                mark = " **(expected exact)**" if expect and bad else ""
                failed |= bool(expect and bad)
                lines.append(f"  | {row}{mark} | {rr['n']} | {rr['bits_differ']}"
                             + (f" ({rr['differ_in_range']} in range)" if "differ_in_range" in rr else "")
                             + f" | {rr.get('max_ulp', '')} | {rr.get('ulp_gt_1', '')} | {rr.get('nan_vs_number', '')}"
                             + f" | {rr.get('signed_zero', '')} | {rr.get('nan_payload_differs', '')} | {detail} |")
            lines.append("")
        lines.append("")
    return "\n".join(lines) + "\n", failed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gpu_dir", type=Path)
    parser.add_argument("--bundle", type=Path, default=HERE / "bundle")
    parser.add_argument("--report", type=Path, default=None, help="write the markdown report here (default stdout)")
    parser.add_argument("--json", type=Path, default=None, help="write the full results as JSON here")
    args = parser.parse_args(argv)
    results = compare(args.gpu_dir, args.bundle)
    text, failed = report(results, args.gpu_dir)
    if args.report:
        args.report.write_text(text)
    else:
        print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
