"""The fuzzer's families for pipelines, warp specialization, tiled copies with dynamic extents, annotated layouts,
every GEMM dtype/transpose pair, reductions used in the block and T.alloc_var state: a couple of seeds of each
compile, run in checked mode and match torch (one seed per arch, to keep CI short: the fuzzer runs both); the
programs contain what the family is for; a program an arch must refuse is refused by name; --list-families."""

import random

import pytest

import tilelang
from tilelang_musa.fuzz import FAMILIES, check
from tilelang_musa.fuzz.__main__ import main
from tilelang_musa.fuzz.families.gemm_combo import GemmComboDesc
from tilelang_musa.fuzz.families.pipeline import PipelineDesc
from tilelang_musa.fuzz.families.warpspec import WarpSpecDesc

NEW = ("pipeline", "warpspec", "tilecopy", "layout", "gemm_combo", "rownorm", "carried")


def generated(family, seed):
    return FAMILIES[family].generate(random.Random(seed), seed)


@pytest.mark.parametrize("family,seed,arch", [(f, s, a) for f in NEW for s, a in ((1, "mp_31"), (2, "mp_22"))])
def test_seeds_of_each_family_match_torch_in_checked_mode(family, seed, arch):
    desc = generated(family, seed)
    outcome = check(desc, arch)
    assert outcome.status == "pass", f"{desc!r}: {outcome.detail}"


def _source(desc, arch):
    fam = FAMILIES[desc.family]
    return tilelang.compile(fam.build(desc), target=f"musa -arch={arch}",
                            pass_configs=fam.pass_configs(desc)).get_kernel_source()


PIPE = PipelineDesc(M=40, K=200, bm=16, bk=32, threads=128, num_stages=3, dtype="float16", op="a*b",
                    via_fragment=False, out="row", config="default", explicit_order=False, dynamic=False,
                    data_seed=7)


@pytest.mark.parametrize("arch,marks,path", [
    ("mp_31", ("tl::tma_load", "tl::barrier_wait", "__launch_bounds__(256"), "tme+producer"),  # 128 more threads
    ("mp_22", ("tl::cp_async_gs_conditional", "tl::cp_async_wait"), "ldlms"),  # LDLMS pieces, the K tail predicated
])
def test_a_pipeline_program_is_pipelined_with_the_arch_s_loads(arch, marks, path):
    source = _source(PIPE, arch)
    for mark in marks:
        assert mark in source, mark
    outcome = check(PIPE, arch)
    assert (outcome.status, outcome.path) == ("pass", path), outcome


def test_a_ring_of_async_barriers_is_refused_by_name_on_mp_22_and_runs_on_mp_31():
    desc = WarpSpecDesc(M=24, K=72, bm=16, bk=32, producer=0, mode="barrier", stages=2, dtype="float32", data_seed=3)
    refused = check(desc, "mp_22")
    assert refused.status == "pass" and refused.detail.startswith("refused as expected: CompileError"), refused
    assert "T.alloc_barrier: mp_22 has no asynchronous barriers" in refused.detail
    ran = check(desc, "mp_31")
    assert ran.status == "pass" and ran.detail == "", ran


def test_a_refusal_the_family_does_not_expect_is_a_compile_error(monkeypatch):
    """The other way round: a program the family says must compile but does not is a failure, and one the family
    says the arch must refuse but that compiles is a mismatch."""
    desc = WarpSpecDesc(M=24, K=72, bm=16, bk=32, producer=0, mode="barrier", stages=2, dtype="float32", data_seed=3)
    fam = FAMILIES["warpspec"]
    monkeypatch.setattr(type(fam), "rejected_on", lambda self, d, arch: None)
    assert check(desc, "mp_22").status == "compile_error"
    monkeypatch.setattr(type(fam), "rejected_on", lambda self, d, arch: "mp_31")
    out = check(desc, "mp_31")
    assert out.status == "mismatch" and "where a CompileError matching 'mp_31' was expected" in out.detail


def test_float8_operands_take_the_fma_path_and_are_exact():
    desc = GemmComboDesc(M=20, N=48, K=40, bm=16, bn=32, bk=16, threads=128, dtype="float8_e4m3", accum="float32",
                         trans_A=True, trans_B=False, policy="Square", path="default", scopes="ss", num_stages=2,
                         data_seed=5)
    assert desc.exact and FAMILIES["gemm_combo"].tolerance(desc, 2) == (0, 0)
    outcome = check(desc, "mp_31")
    assert (outcome.status, outcome.path) == ("pass", "fma"), outcome


def test_every_new_family_is_listed_and_generates_each_dtype_pair():
    names = set(FAMILIES)
    assert set(NEW) <= names
    combos = [generated("gemm_combo", s) for s in range(200)]
    assert len({(d.dtype, d.accum) for d in combos}) == 8
    assert {(d.trans_A, d.trans_B) for d in combos} == {(False, False), (False, True), (True, False), (True, True)}
    # the pairs the matrix paths take get tiles those paths can cut into instructions
    assert all(min(d.bm, d.bn) >= 32 for d in combos if d.accum == "float32" and d.dtype in ("float16", "bfloat16"))
    modes = {generated("warpspec", s).mode for s in range(60)}
    assert modes == {"sync", "barrier", "tma"}


def test_list_families_prints_one_per_line(capsys):
    assert main(["--list-families"]) == 0
    assert capsys.readouterr().out.split("\n")[:-1] == list(FAMILIES)



def test_a_16_bit_accumulated_sum_is_compared_within_its_rounding_and_a_lost_term_still_fails():
    """accumulation_atol (families/reduce.py) covers the serial and the tree order of a bfloat16 / float16 sum of
    N(0, 1) terms, which a tolerance relative to a cancelling result did not (program 4332 of seed 42002), and stays
    tight enough that a float16 sum which loses its largest term still fails (in bfloat16, 8 significand bits, a
    sum of 256 terms in the worst order cannot tell a lost term of 1.6 sigma from rounding: the bound says so)."""
    import torch

    from tilelang_musa.fuzz.families.reduce import UNIT_ROUNDOFF, accumulation_atol

    def serial(x, dtype):
        s = torch.zeros((), dtype=dtype)
        for v in x.to(dtype):
            s = (s.float() + v.float()).to(dtype)
        return s.float()

    def tree(x, dtype):
        v = x.to(dtype)
        while v.numel() > 1:
            v = (v[0::2].float() + v[1::2].float()).to(dtype)
        return v.float()[0]

    g = torch.Generator().manual_seed(41)
    for dtype, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        atol = accumulation_atol("sum", 256, UNIT_ROUNDOFF[name])
        lost = 0
        for _ in range(40):
            x = torch.randn(256, generator=g).to(dtype).float()
            exact = x.double().sum().item()
            for order in (serial, tree):
                assert abs(order(x, dtype).item() - exact) <= atol + 2e-2 * abs(exact), (name, order.__name__)
            lost += x.abs().max().item() > atol + 2e-2 * abs(exact)
        if name == "float16":
            assert lost >= 36, lost  # the largest of 256 N(0, 1) terms, ~2.7, lost: caught
        else:
            assert atol < 1.7, atol
