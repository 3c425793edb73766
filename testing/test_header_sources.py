"""One source for each MUSA header text the simulator and the device-compiler check share (issue 43 item 4): the
driver API's TME descriptor and the robust descriptors are declared once (src/tl_templates/sim/decl/), the two 16-bit
float types come from one parameterized header (sim/float16_api.h), and the register-operand warp MMAs of mp_22 and
mp_31 share one block GEMM (tl_templates/musa/gemm_register_mma.h)."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
SIM = SRC / "tl_templates" / "sim"
CHECK = ROOT / "testing" / "device_compilers"


def header_texts():
    for directory in (SRC / "tl_templates", CHECK):
        for path in directory.rglob("*.h"):
            yield path, path.read_text()


@pytest.mark.parametrize("definition", [r"struct\s+alignas\(64\)\s+MUtensorDescriptor_st\b",
                                        r"enum\s+MUtensorDescriptorDataType_enum\b", r"class\s+robust_ptr\b",
                                        r"struct\s+robust_v4_addr_t\b"])
def test_each_shared_musa_declaration_is_written_once(definition):
    where = [path.relative_to(ROOT) for path, text in header_texts() if re.search(definition, text)]
    assert len(where) == 1 and where[0].parts[:4] == ("src", "tl_templates", "sim", "decl"), where


def test_the_device_compiler_shims_include_the_simulators_declarations():
    for shim in ("clang_musa", "nvcc_musa"):
        assert '#include "tl_templates/sim/decl/musa_driver_decl.h"' in (CHECK / shim / "musa.h").read_text()
    assert '#include "tl_templates/sim/decl/musa_robust_decl.h"' in (CHECK / "musa_robust_decl.h").read_text()


def test_the_16_bit_float_headers_define_nothing_of_their_own():
    for name in ("musa_fp16.h", "musa_bf16.h"):
        text = (SIM / name).read_text()
        assert '#include "sim/float16_api.h"' in text
        assert not re.search(r"^\s*(inline|struct)\b", text, re.M), name


def test_the_register_mma_headers_share_one_block_gemm():
    for name in ("gemm_mp22_mma.h", "gemm_mp31_wmma.h"):
        text = (SRC / "tl_templates" / "musa" / name).read_text()
        assert "TL_GEMM_REGISTER_MMA_FORMS(" in text and "__builtin_memcpy" not in text, name


PROGRAM = r"""
#include <cstdio>
#include "musa_fp16.h"
#include "musa_bf16.h"
int main() {
  const float third = 1.0f / 3.0f;
  __half h = __float2half(third);
  __mt_bfloat16 b = __float2bfloat16(third);
  __half2 h2 = __floats2half2_rn(third, -2.0f);
  __mt_bfloat162 b2 = __floats2bfloat162_rn(third, -2.0f);
  std::printf("%04x %04x %04x %04x %d %d %d %d %.12g %.12g\n", __half_as_ushort(h), __bfloat16_as_ushort(b),
              __half_as_ushort(__high2half(h2)), __bfloat16_as_ushort(__high2bfloat16(b2)),
              __hisinf(__ushort_as_half(0x7c00)), __hisinf(__ushort_as_bfloat16(0xff80)),
              (int)__hisnan(__ushort_as_half(0x7c01)), (int)__hisnan(__ushort_as_bfloat16(0x7f81)),
              __half2float(h + h), __bfloat162float(b * b));
  return 0;
}
"""


def test_both_16_bit_types_round_and_classify_bit_exactly(tmp_path):
    source, binary = tmp_path / "f16.cc", tmp_path / "f16"
    source.write_text(PROGRAM)
    subprocess.run(["g++", "-std=c++17", "-O1", "-pthread", f"-I{SIM}", f"-I{SRC}", "-DTL_SIMULATOR=1",
                    "-D__MUSA_ARCH__=310", str(source), "-o", str(binary)], check=True, capture_output=True)
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.split()
    # 1/3 is 0x3555 in binary16 and 0x3eab in bfloat16 (round to nearest even); -2 is 0xc000 / 0xc000;
    # +inf 0x7c00 / -inf 0xff80; 0x7c01 / 0x7f81 are NaNs; 1/3 + 1/3 in half is 0.66650390625, (1/3)^2 in
    # bfloat16 (0.333984375^2 = 0.11154... rounded to 8 bits) is 0.111328125.
    assert out == ["3555", "3eab", "c000", "c000", "1", "-1", "1", "1", "0.66650390625", "0.111328125"]
