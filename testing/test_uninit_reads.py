"""Uninitialised reads named in the simulator's checked mode (issue 41): a load of a shared element no thread of the
block wrote, or of a fragment/local element its thread never wrote, ends the launch naming the buffer, the element,
the line of the generated source and the thread. Default mode still reads the poison (NaN) and says nothing.

The mechanism is src/tl_templates/sim/sim/uninit_reads.h: a shadow of written shared bytes per block, and the
codegen's check of float fragment/local loads (an all-ones NaN is the poison)."""

import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_22", "mp_31"]


def line_of(source: str, snippet: str) -> int:
    return next(number for number, text in enumerate(source.splitlines(), 1) if snippet in text)


def shared_never_written():
    """Each block fills the first half of S and reads the second half."""

    @T.prim_func
    def shared_bug(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((256,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[bx * 128 + tx]
            T.sync_threads()
            B[bx * 128 + tx] = S[tx + 128]

    return shared_bug


def fragment_never_written():
    @T.prim_func
    def fragment_bug(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            F = T.alloc_fragment((128,), "float32")
            for i in T.Parallel(128):
                B[bx * 128 + i] = F[i] + A[bx * 128 + i]

    return fragment_bug


def local_never_written():
    @T.prim_func
    def local_bug(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            L = T.alloc_local((2,), "float16")
            tx = T.get_thread_binding()
            L[0] = A[bx * 128 + tx]
            B[bx * 128 + tx] = L[0] + L[1]

    return local_bug


PLANTED = {
    # name: (program, the load's snippet in the kernel source, the message's space, element)
    "shared": (shared_never_written, "= S[", r"shared load of `S` at element 1\d\d, which no thread of this block "
                                             r"has written"),
    "fragment": (fragment_never_written, "F)", r"fragment(/local)? load of `F` at element 0, which this thread has "
                                               r"not written"),
    "local": (local_never_written, "L[1]", r"fragment/local load of `L` at element 1, which this thread has not "
                                           r"written"),
}


@pytest.mark.parametrize("kind", list(PLANTED))
@pytest.mark.parametrize("arch", ARCHS)
def test_a_planted_uninitialised_read_is_named_in_checked_mode(arch, kind, monkeypatch):
    program, snippet, what = PLANTED[kind]
    kernel = tilelang.compile(program(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source()
    assert "tl_sim::" not in source  # the user's source is unchanged; the simulator builds the checked print
    a = rand((256,), torch.float32)
    b = torch.zeros(256)
    kernel(a, b)  # default mode: no check, the poison shows as NaN
    assert torch.isnan(b).all()
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(a, torch.zeros(256))
    message = str(info.value)
    assert re.search(r"block \(0,0,0\), thread \(\d+,0,0\): uninitialised read: " + what, message), message
    assert f"(line {line_of(source, snippet)} of the kernel source" in message, message
    assert "test_uninit_reads.py:" in message, message  # and the user's line


def test_the_checked_print_checks_float_local_loads_only():
    """Integer locals hold -1 legitimately (the poison's bytes): their loads get no NaN check (their defined bytes
    are test_uninit_integer_reads.py's); stores never are."""
    from tilelang_musa.codegen import generate
    from tilelang_musa.target import determine_target
    from tilelang_musa.transform import lower
    from tilelang_musa.transform.split_kernels import split_kernels

    @T.prim_func
    def mixed(A: T.Tensor((128,), "float32"), I: T.Tensor((128,), "int32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            L = T.alloc_local((2,), "float32")
            N = T.alloc_local((2,), "int32")
            tx = T.get_thread_binding()
            L[0] = A[tx]
            N[0] = I[tx]
            B[tx] = L[0] + N[0]

    target = determine_target("musa -arch=mp_31")
    funcs = [lower(kernel, target, {}) for kernel in split_kernels(mixed)]
    source = generate(funcs, target, "mixed", sim_checks=True)
    checked = source.checked_text
    assert re.search(r'tl_sim::CheckLocalRead\(L, 0, 1, "fragment/local", "L", __LINE__\)', checked), checked
    assert "CheckLocalRead(N" not in checked
    assert len(re.findall("CheckLocalRead", checked)) == 1  # the store `L[0] = ...` is not checked
    assert "CheckLocalRead" not in source.text


@pytest.mark.parametrize("arch", ARCHS)
def test_values_with_the_poison_bytes_written_by_the_kernel_are_not_reported(arch, monkeypatch):
    """int32 -1 and int8 -1 are all-ones bytes, as the poison: written to shared memory they are not reported."""

    @T.prim_func
    def through_shared(A: T.Tensor((256,), "int32"), C: T.Tensor((256,), "int8"), B: T.Tensor((256,), "int32"),
                       D: T.Tensor((256,), "int8")):
        with T.Kernel(2, threads=128) as bx:
            S = T.alloc_shared((128,), "int32")
            R = T.alloc_shared((128,), "int8")
            T.copy(A[bx * 128:(bx + 1) * 128], S)
            T.copy(C[bx * 128:(bx + 1) * 128], R)
            for i in T.Parallel(128):
                B[bx * 128 + i] = S[127 - i]
                D[bx * 128 + i] = R[127 - i]

    kernel = tilelang.compile(through_shared, target=f"musa -arch={arch}")
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    a = torch.randint(-3, 3, (256,), dtype=torch.int32)
    a[::2] = -1
    c = torch.full((256,), -1, dtype=torch.int8)
    c[1::3] = 5
    b, d = torch.zeros(256, dtype=torch.int32), torch.zeros(256, dtype=torch.int8)
    kernel(a, c, b, d)
    torch.testing.assert_close(b, a.view(2, 128).flip(1).reshape(-1))
    torch.testing.assert_close(d, c.view(2, 128).flip(1).reshape(-1))


def chunk_state_recurrence(S, DK, DV, chunk, use_initial_state):
    """A faithful small copy of the bug in upstream TileLang's gated-delta-rule chunk kernel (examples/gdn,
    chunk_delta_h) run without an initial state: the state tile `h_s` is saved to `h` and fed to a GEMM in the first
    chunk, but only the fragment `h_f` was cleared, so `h_s` is read before anything writes it."""

    @T.prim_func
    def chunk_h(K: T.Tensor((S, DK), "float16"), W: T.Tensor((S, DK), "float16"), U: T.Tensor((S, DV), "float16"),
                h0: T.Tensor((DK, DV), "float16"), h: T.Tensor((S // chunk, DK, DV), "float16"),
                V_new: T.Tensor((S, DV), "float32")):
        with T.Kernel(1, threads=128) as bx:
            h_s = T.alloc_shared((DK, DV), "float16")
            h_f = T.alloc_fragment((DK, DV), "float32")
            W_s = T.alloc_shared((chunk, DK), "float16")
            K_s = T.alloc_shared((chunk, DK), "float16")
            U_s = T.alloc_shared((chunk, DV), "float16")
            V_f = T.alloc_fragment((chunk, DV), "float32")
            V_s = T.alloc_shared((chunk, DV), "float16")
            if use_initial_state:
                T.copy(h0, h_s)
                T.copy(h_s, h_f)
            else:
                T.clear(h_f)
            for i_s in T.Pipelined(S // chunk, num_stages=1):
                T.copy(h_s, h[i_s, :, :])  # the previous state, like an epilogue
                T.copy(W[i_s * chunk:(i_s + 1) * chunk, :], W_s)
                T.gemm(W_s, h_s, V_f, clear_accum=True)
                T.copy(U[i_s * chunk:(i_s + 1) * chunk, :], U_s)
                for i, j in T.Parallel(chunk, DV):
                    V_f[i, j] = U_s[i, j] - V_f[i, j]
                T.copy(V_f, V_new[i_s * chunk:(i_s + 1) * chunk, :])
                T.copy(K[i_s * chunk:(i_s + 1) * chunk, :], K_s)
                T.copy(V_f, V_s)
                T.gemm(K_s, V_s, h_f, transpose_A=True)
                T.copy(h_f, h_s)

    return chunk_h


def chunk_state_reference(K, W, U, h0, chunk):
    state = h0.float()
    hs, vs = [], []
    for i in range(K.shape[0] // chunk):
        rows = slice(i * chunk, (i + 1) * chunk)
        hs.append(state.half())
        v = U[rows].float() - W[rows].float() @ state.half().float()
        vs.append(v)
        state = state + K[rows].float().T @ v.half().float()
    return torch.stack(hs), torch.cat(vs)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_chunk_state_kernel_without_initial_state_names_the_unwritten_state_tile(arch, monkeypatch):
    S, DK, DV, chunk = 64, 32, 32, 32
    gen = [rand((S, DK), torch.float16, 1) * 0.25, rand((S, DK), torch.float16, 2) * 0.25,
           rand((S, DV), torch.float16, 3), rand((DK, DV), torch.float16, 4)]
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    # With the initial state the program is correct, and checked mode reports nothing.
    good = tilelang.compile(chunk_state_recurrence(S, DK, DV, chunk, True), target=f"musa -arch={arch}")
    h, v = torch.full((S // chunk, DK, DV), float("nan"), dtype=torch.float16), torch.full((S, DV), float("nan"))
    good(*gen, h, v)
    h_ref, v_ref = chunk_state_reference(*gen, chunk)
    torch.testing.assert_close(h.float(), h_ref.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(v, v_ref, atol=2e-2, rtol=2e-2)
    # Without it, the first chunk reads h_s before anything wrote it: named, instead of NaN everywhere.
    bad = tilelang.compile(chunk_state_recurrence(S, DK, DV, chunk, False), target=f"musa -arch={arch}")
    # mp_22 copies h_s to h with loads of the generated code, mp_31 with a TME store: either read is named.
    with pytest.raises(KernelLaunchError) as info:
        bad(*gen, h, v)
    message = str(info.value)
    assert re.search(r"uninitialised read: shared load of `h_s` at element \d+, (read by a TME store, )?which no "
                     r"thread of this block has written \(line \d+ of the kernel source[;)]", message), message
    line = int(re.search(r"line (\d+) of the kernel source", message).group(1))
    assert "h_s" in bad.get_kernel_source().splitlines()[line - 1]


def test_an_output_left_entirely_poison_gets_a_hint_pointing_to_checked_mode(monkeypatch):
    """Default mode: an output the launcher allocated (and poisoned) that comes back all NaN gets a one-time hint."""
    import warnings

    monkeypatch.delenv("TILELANG_SIM_CHECK", raising=False)

    @T.prim_func
    def scaled(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            L = T.alloc_local((2,), "float32")
            tx = T.get_thread_binding()
            B[tx] = A[tx] * L[1]  # L[1] is never written

    bad = tilelang.compile(scaled, out_idx=[1], target="musa -arch=mp_31")
    with pytest.warns(UserWarning, match=r"kernel 'scaled_kernel': output `B` is entirely NaN / 0xFF bytes after the "
                                         r"launch.*TILELANG_SIM_CHECK=1 names the first read of memory nothing "
                                         r"wrote"):
        assert torch.isnan(bad(rand((128,), torch.float32))).all()
    with warnings.catch_warnings():  # once per kernel and output
        warnings.simplefilter("error")
        bad(rand((128,), torch.float32))

    @T.prim_func
    def doubled(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            B[tx] = A[tx] * 2.0

    good = tilelang.compile(doubled, out_idx=[1], target="musa -arch=mp_31")
    a = rand((128,), torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(good(a), a * 2)


def fill_kernel(dtype, value, threads=128):
    @T.prim_func
    def fill(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), dtype)):
        with T.Kernel(1, threads=threads) as bx:
            tx = T.get_thread_binding()
            B[tx] = T.Cast(dtype, value) if value is not None else T.sqrt(-1.0 - A[tx] * A[tx])

    return fill


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype, value", [("int8", -1), ("int32", -1), ("uint8", 255), ("float32", None)])
def test_an_output_whose_legitimate_value_is_all_ones_or_a_computed_nan_gets_no_hint(arch, dtype, value,
                                                                                       monkeypatch):
    """The hint is for the poison's exact bytes in dtypes whose all-ones pattern no kernel computes: an integer
    output of -1 (or the type's maximum), or a float output of computed NaN (the square root of a negative
    number), is legitimate. Before, the int8 fill of -1 drew the hint."""
    import warnings

    monkeypatch.delenv("TILELANG_SIM_CHECK", raising=False)
    kernel = tilelang.compile(fill_kernel(dtype, value), out_idx=[1], target=f"musa -arch={arch}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = kernel(rand((128,), torch.float32))
    if value is None:
        assert torch.isnan(out).all()
    else:
        assert (out.view(torch.uint8) == 0xFF).all()  # the kernel wrote the poison's bytes, legitimately


@pytest.mark.parametrize("arch", ARCHS)
def test_a_dead_load_of_an_unwritten_fragment_slot_is_not_reported(arch):
    """A reduction into a shared tile stages it through a fragment: threads outside the fragment's layout add their
    never-written slot to the all-reduce result and never store it. That load is legitimate (its value dies), so a
    fragment/local load of poison is only an error once the thread stores a NaN to memory."""
    from tilelang_musa.fuzz.families.reduce import ReduceDesc
    from tilelang_musa.fuzz.runner import check

    desc = ReduceDesc(kind="sum", reduced=8, kept=1, block=2, dim=1, clear=True, src_scope="fragment",
                      dst_scope="shared", dtype="float32", acc_dtype="float32", threads=32, data_seed=14672592, total=9)
    outcome = check(desc, arch)  # checked mode, against torch
    assert outcome.status == "pass", outcome.detail


def gemm_with_element_zero_unwritten():
    """Every element of the shared A tile but element 0 is written before the GEMM reads it."""

    @T.prim_func
    def gemm_hole(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"),
                  C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((32, 32), "float16")
            B_s = T.alloc_shared((32, 32), "float16")
            C_f = T.alloc_fragment((32, 32), "float32")
            for i, j in T.Parallel(32, 32):
                if i + j > 0:
                    A_s[i, j] = A[i, j]
            T.copy(B, B_s)
            T.clear(C_f)
            T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C)

    return gemm_hole


@pytest.mark.parametrize("arch", ARCHS)
def test_element_zero_of_a_tile_handed_to_a_gemm_is_not_taken_as_written(arch, monkeypatch):
    """Handing `&A_s[0]` to the GEMM template is no write of element 0: its operand fetch names it."""
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(gemm_with_element_zero_unwritten(), out_idx=[2], target=f"musa -arch={arch}")
    assert "tl::gemm" in kernel.get_kernel_source()
    with pytest.raises(KernelLaunchError) as info:
        kernel(rand((32, 32), torch.float16), rand((32, 32), torch.float16))
    message = str(info.value)
    assert re.search(r"uninitialised read: shared load of `A_s` at element 0, read by (a GEMM|an SQMMA) operand "
                     r"fetch, which no thread of this block has written", message), message


def cumsum_into_a_second_tile_then_copied_out():
    """T.cumsum of int32 from S into D (the template writes D through a pointer it derives), then D copied out:
    a prefix sum of -1 is the poison's bytes."""

    @T.prim_func
    def scan(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((64,), "int32")
            D = T.alloc_shared((64,), "int32")
            T.copy(A, S)
            T.cumsum(S, D, dim=0)
            T.copy(D, B)

    return scan


@pytest.mark.parametrize("arch", ARCHS)
def test_a_template_result_equal_to_the_poison_bytes_is_not_reported(arch, monkeypatch):
    """Fuzz finding (cumsum, seed 42001 program 116): the template's writes to D are not seen by the shadow; the
    address handed to it counts the whole of D written for the generated code's loads."""
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    kernel = tilelang.compile(cumsum_into_a_second_tile_then_copied_out(), out_idx=[1], target=f"musa -arch={arch}")
    a = torch.tensor([-1, 1] * 32, dtype=torch.int32)  # prefix sums -1, 0, -1, 0, ...
    torch.testing.assert_close(kernel(a), torch.cumsum(a, 0).to(torch.int32))
