"""TME copies (mp_31): T.tma_copy loads and stores, T.copy stores from shared memory, cache hints, a swizzled tile
feeding an SQMMA T.gemm, the host-built descriptors, and the errors; in the simulator against torch."""

import functools
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import poison, rand

MP31 = "musa -arch=mp_31"


def test_guide_snippet_loads_a_box_with_zero_filled_tails():
    """The guide's snippet: a 64 x 32 tile of A (70 x 40: tails) through the TME into shared memory, then to B
    (128 x 64, the tiles padded) by plain copies: the engine zero-fills the box elements outside A."""

    @T.prim_func
    def load(A: T.Tensor((70, 40), "float16"), B: T.Tensor((128, 64), "float16")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            tile = T.alloc_shared((64, 32), "float16")
            barrier = T.alloc_barrier(128)
            T.tma_copy(A[by * 64, bx * 32], tile, barrier=barrier)
            T.barrier_arrive(barrier)
            T.barrier_wait(barrier, 0)
            T.copy(tile, B[by * 64, bx * 32], disable_tma=True)

    kernel = tilelang.compile(load, target=MP31)
    src = kernel.get_kernel_source()
    assert "__grid_constant__ const MUtensorDescriptor desc_A" in src
    assert "tl::barrier_expect_tx(1, 4096);" in src  # the whole box, out-of-bounds elements included
    assert ("tl::tma_load<0, 3, 1, CacheHint::CACHE_NORMAL, CacheHint::CACHE_NORMAL>"
            "(desc_A, 1, &tile[0], v2i32_t{32, 64}, v2i32_t{") in src
    assert src.count("tl::tma_load<") == 1 and "if (((int)threadIdx.x) == 0) {" in src
    host = kernel.get_host_source()
    assert "muTensorDescriptorEncode(&desc_A, MU_TENSOR_DESCRIPTOR_DATA_TYPE_FLOAT16, 2, (void*)A" in host
    assert "muuint64_t dims[2] = {(muuint64_t)40, (muuint64_t)70};" in host  # innermost first
    assert "muuint64_t strides[1] = {(muuint64_t)80};" in host  # bytes
    a = rand((70, 40), torch.float16, 1)
    b = poison((128, 64), torch.float16)
    kernel(a, b)
    expected = torch.zeros(128, 64, dtype=torch.float16)
    expected[:70, :40] = a
    torch.testing.assert_close(b, expected, rtol=0, atol=0)


def test_cache_hints_are_the_instructions_hint_arguments():
    @T.prim_func
    def hints(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            t0 = T.alloc_shared((16, 64), "float16")
            t1 = T.alloc_shared((16, 64), "float16")
            t2 = T.alloc_shared((16, 64), "float16")
            barrier = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], t0, barrier=barrier, inner_cache_policy="cache_once", outer_cache_policy="cache_persist")
            T.tma_copy(A[16, 0], t1, barrier=barrier, eviction_policy="evict_first")
            T.tma_copy(A[32, 0], t2, barrier=barrier, outer_cache_policy="cache_none")
            T.barrier_arrive(barrier)
            T.barrier_wait(barrier, 0)
            T.copy(t0, B[0, 0], eviction_policy="evict_last")

    src = tilelang.compile(hints, target=MP31).get_kernel_source()
    assert "tl::tma_load<0, 3, 1, CacheHint::CACHE_ONCE, CacheHint::CACHE_PERSIST>(desc_A" in src
    assert "tl::tma_load<0, 3, 1, CacheHint::CACHE_ONCE, CacheHint::CACHE_ONCE>(desc_A" in src
    assert "tl::tma_load<0, 3, 1, CacheHint::CACHE_NORMAL, CacheHint::CACHE_NONE>(desc_A" in src
    assert "tl::tma_store<0, 3, 1, CacheHint::CACHE_PERSIST, CacheHint::CACHE_PERSIST>(desc_B" in src


def copy_with_hints():
    @T.prim_func
    def load(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 64), "float16")
            T.copy(A, tile, inner_cache_policy="cache_once", outer_cache_policy="cache_normal")
            T.copy(tile, B, disable_tma=True)

    return load


def test_copy_load_with_cache_hints_is_a_tme_load_that_waits_for_itself():
    kernel = tilelang.compile(copy_with_hints(), target=MP31)
    src = kernel.get_kernel_source()
    assert "tl::tma_load<0, 3, 1, CacheHint::CACHE_ONCE, CacheHint::CACHE_NORMAL>(desc_A, 1, &tile[0]" in src
    assert src.index("tl::tma_load<") < src.index("tl::barrier_sync(1);")  # every thread arrives and waits
    a = rand((64, 64), torch.float16, 6)
    b = poison((64, 64), torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_copy_load_with_cache_hints_warns_where_no_tme(monkeypatch):
    from tilelang_musa import diagnostics

    monkeypatch.setattr(diagnostics, "_WARNED", set())
    with pytest.warns(tilelang.TileLangWarning, match="cache hints of TME copies"):
        src = tilelang.compile(copy_with_hints(), target="musa -arch=mp_22").get_kernel_source()
    assert "tme" not in src


@functools.cache
def load_rank(rank: int):
    """A box of a rank-`rank` tensor with tails in every dim, loaded with T.tma_copy and copied out plainly. The 1-D
    box is wider than one instruction's 256 elements: two column blocks."""
    shape = {1: (1100,), 2: (10, 24), 3: (3, 5, 24), 4: (2, 3, 5, 8), 5: (2, 2, 3, 3, 8)}[rank]
    box = {1: (512,), 2: (8, 16), 3: (2, 4, 16), 4: (2, 2, 4, 8), 5: (1, 2, 2, 2, 8)}[rank]
    grid = [-(-s // b) for s, b in zip(shape, box)]
    out_shape = tuple(g * b for g, b in zip(grid, box))
    blocks = 1
    for g in grid:
        blocks *= g

    @T.prim_func
    def load(A: T.Tensor(shape, "float16"), B: T.Tensor(out_shape, "float16")):
        with T.Kernel(blocks, threads=64) as bx:
            tile = T.alloc_shared(box, "float16")
            barrier = T.alloc_barrier(64)
            origin = []
            rest = bx
            for g, b in zip(reversed(grid), reversed(box)):
                origin.insert(0, (rest % g) * b)
                rest = rest // g
            T.tma_copy(A[tuple(origin)], tile, barrier=barrier)
            T.barrier_arrive(barrier)
            T.barrier_wait(barrier, 0)
            T.copy(tile, B[tuple(origin)], disable_tma=True)

    return tilelang.compile(load, target=MP31), shape, out_shape


@pytest.mark.parametrize("rank", [1, 3, 5])  # 2: the guide's snippet
def test_loads_of_rank_1_to_5_zero_fill_their_tails(rank):
    kernel, shape, out_shape = load_rank(rank)
    src = kernel.get_kernel_source()
    assert "tl::tma_load<" in src
    if rank > 1:
        assert f"v{rank}i32_t{{" in src
    else:  # 2 blocks of 256 halves, 512 bytes apart: box 256, the start of the first
        assert re.search(r"tl::tma_load<0, 3, 1, CacheHint::CACHE_NORMAL, CacheHint::CACHE_NORMAL, 2, 512>\(desc_A, 1, "
                         r"&tile\[0\], 256, ", src)
    a = rand(shape, torch.float16, rank)
    b = poison(out_shape, torch.float16)
    kernel(a, b)
    expected = torch.zeros(out_shape, dtype=torch.float16)
    expected[tuple(slice(0, s) for s in shape)] = a
    torch.testing.assert_close(b, expected, rtol=0, atol=0)


@functools.cache
def store_kernel(explicit: bool, pass_configs: tuple = (), disable_tma: bool = False):
    """Tiles of A (with tails) into shared memory by plain copies, stored to B through the TME."""

    @T.prim_func
    def store(A: T.Tensor((100, 48), "float32"), B: T.Tensor((100, 48), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            tile = T.alloc_shared((64, 32), "float32")
            T.copy(A[by * 64, bx * 32], tile)
            if explicit:
                T.tma_copy(tile, B[by * 64, bx * 32])
                T.tma_store_wait()
            else:
                T.copy(tile, B[by * 64, bx * 32], disable_tma=disable_tma)

    return tilelang.compile(store, target=MP31, pass_configs=dict(pass_configs))


@pytest.mark.parametrize("explicit", [True, False], ids=["tma_copy", "copy"])
def test_stores_write_only_the_tensors_elements(explicit):
    kernel = store_kernel(explicit)
    src = kernel.get_kernel_source()
    assert ("tl::tma_store<0, 3, 1, CacheHint::CACHE_NORMAL, CacheHint::CACHE_NORMAL>"
            "(desc_B, &tile[0], v2i32_t{32, 64}, v2i32_t{") in src
    assert "tl::tma_store_arrive();" in src and "tl::tma_store_wait<0>();" in src
    # the tile is complete before the one thread stores it
    assert src.index("__syncthreads();") < src.index("tl::tma_store<")
    a = rand((100, 48), torch.float32, 3)
    b = poison((100, 48), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a, rtol=0, atol=0)


def test_a_tensor_the_engine_cannot_address_is_refused_naming_it():
    """The launcher knows a TME descriptor's global address must be 16-byte aligned, so it refuses the view; the
    host wrapper, called without it (as C calls an exported library), fails the launch naming the tensor."""
    import ctypes

    kernel = store_kernel(False)
    a = rand((100, 48), torch.float32, 3)
    b = torch.empty(100 * 48 + 1)[1:].view(100, 48)  # 4 bytes past a 16-byte boundary
    assert [p.name for p in kernel.params] == ["A", "B"] and kernel.params[1].align == 16
    with pytest.raises(ValueError, match="B is read or written 16 bytes at a time, but its data starts 4 bytes"):
        kernel(a, b)
    library = ctypes.CDLL(str(kernel.library_path))
    library.get_last_error.restype = ctypes.c_char_p
    pointers = [ctypes.c_void_p(a.data_ptr()), ctypes.c_void_p(b.data_ptr())]
    argv = (ctypes.c_void_p * 2)(*[ctypes.addressof(p) for p in pointers])
    assert library.call_packed(argv, 2, None) == -1
    assert "cannot build the TME descriptor of tensor `B`" in library.get_last_error().decode()


def test_copy_store_stays_plain_with_disable_tma_or_the_pass_config():
    for kernel in (store_kernel(False, disable_tma=True),
                   store_kernel(False, ((tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER, True),))):
        src = kernel.get_kernel_source()
        assert "tme" not in src and "MUtensorDescriptor" not in src


def test_copy_store_that_tme_cannot_do_stays_plain():
    @T.prim_func
    def store(A: T.Tensor((64, 6), "float32"), B: T.Tensor((64, 6), "float32")):  # 24-byte rows
        with T.Kernel(1, threads=64):
            tile = T.alloc_shared((64, 6), "float32")
            T.copy(A, tile)
            T.copy(tile, B)

    src = tilelang.compile(store, target=MP31).get_kernel_source()
    assert "tme" not in src



def test_static_shared_tiles_are_no_tme_operands():
    """A tile in static shared memory (scope="shared") is placed by mcc, outside the arena whose alignment the TME
    needs: a T.copy store from it stays a plain copy (and runs), T.tma_copy names the rule."""
    @T.prim_func
    def store(A: T.Tensor((32, 32), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=128):
            frag = T.alloc_fragment((32, 32), "float32")
            tile = T.alloc_shared((1024,), "float32", scope="shared")
            T.copy(A, frag)
            T.copy(T.reshape(frag, [1024]), tile)
            T.copy(tile, B)

    kernel = tilelang.compile(store, target=MP31)
    assert "tme" not in kernel.get_kernel_source()
    a, b = rand((32, 32), torch.float32, 2), poison((1024,), torch.float32)
    kernel(a, b)
    torch.testing.assert_close(b, a.reshape(1024))

    @T.prim_func
    def explicit(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 64), "float16", scope="shared")
            barrier = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], tile, barrier=barrier)

    assert "tile is static shared memory (scope='shared')" in _compile_error(explicit)

@functools.cache
def tme_gemm():
    """T.gemm on SQMMA with both operands loaded by T.tma_copy into the swizzled layouts the gemm chose: A is
    K-major 512 bytes wide (two column blocks of 256 bytes), B MN-major (SG32)."""
    M, N, K, BK = 64, 64, 512, 256

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, BK), "float16")
            B_s = T.alloc_shared((BK, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            barrier = T.alloc_barrier(128)
            T.clear(acc)
            for k in T.serial(K // BK):
                T.tma_copy(A[0, k * BK], A_s, barrier=barrier)
                T.tma_copy(B[k * BK, 0], B_s, barrier=barrier)
                T.barrier_arrive(barrier)
                T.barrier_wait(barrier, k % 2)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C)

    return tilelang.compile(gemm, target=MP31)


def test_swizzled_tiles_loaded_by_tme_feed_an_sqmma_gemm():
    kernel = tme_gemm()
    src = kernel.get_kernel_source()
    assert ("tl::tma_load<1, 3, 1, CacheHint::CACHE_NORMAL, CacheHint::CACHE_NORMAL, 2, 16384>"
            "(desc_A, 1, &A_s[0], v2i32_t{128, 64}, v2i32_t{") in src
    assert ("tl::tma_load<2, 3, 1, CacheHint::CACHE_NORMAL, CacheHint::CACHE_NORMAL>"
            "(desc_B, 1, &B_s[0], v2i32_t{64, 256}, v2i32_t{") in src
    assert "gemm_ss_mp31_sqmma_swizzled" in src
    a = rand((64, 512), torch.float16, 4)
    b = rand((512, 64), torch.float16, 5)
    c = poison((64, 64), torch.float32)
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)


def test_leader_is_the_first_thread_of_the_guarded_range():
    @T.prim_func
    def load(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            tile = T.alloc_shared((64, 64), "float16")
            barrier = T.alloc_barrier(256)
            if tx >= 128:
                T.tma_copy(A, tile, barrier=barrier, leader_scope_threads=64)
            if tx < 128:
                T.tma_copy(A, tile, barrier=barrier)
            T.barrier_arrive(barrier)

    src = tilelang.compile(load, target=MP31).get_kernel_source()
    assert "if ((((int)threadIdx.x) % 64) == 0) {" in src  # (tx - 128) % 64, simplified
    assert "if (((int)threadIdx.x) == 0) {" in src


def _compile_error(body, target=MP31, **kwargs):
    with pytest.raises(tilelang.CompileError) as info:
        tilelang.compile(body, target=target, **kwargs)
    return str(info.value)


def test_a_load_without_barrier_is_an_error_at_the_line():
    with pytest.raises(tilelang.CompileError, match=r"T.tma_copy: a load \(global -> shared\) needs barrier=") as info:
        @T.prim_func
        def load(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128):
                tile = T.alloc_shared((64, 64), "float16")
                T.tma_copy(A, tile)
    assert "T.tma_copy(A, tile)" in str(info.value)


def test_eviction_policy_excludes_the_cache_policies():
    for construct in (T.copy, T.tma_copy):
        with pytest.raises(tilelang.CompileError, match="eviction_policy cannot be combined with inner_cache_policy"):
            @T.prim_func
            def load(A: T.Tensor((64, 64), "float16")):
                with T.Kernel(1, threads=128):
                    tile = T.alloc_shared((64, 64), "float16")
                    construct(A, tile, eviction_policy="evict_first", inner_cache_policy="cache_once")


def test_tma_copy_on_mp22_is_an_error():
    @T.prim_func
    def load(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 64), "float16")
            T.tma_copy(tile, A)

    message = _compile_error(load, target="musa -arch=mp_22")
    assert "T.tma_copy: mp_22 has no TME" in message and "T.tma_copy(tile, A)" in message


def test_tma_store_wait_on_mp22_is_an_error():
    @T.prim_func
    def wait(A: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=128):
            T.tma_store_wait()

    message = _compile_error(wait, target="musa -arch=mp_22")
    assert "T.tma_store_wait: mp_22 has no TME" in message and "T.tma_store_wait()" in message


def _load_error(shape, dtype, region, tile_shape, tile_dtype):
    @T.prim_func
    def load(A: T.Tensor(shape, dtype)):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared(tile_shape, tile_dtype)
            barrier = T.alloc_barrier(128)
            T.tma_copy(A[region], tile, barrier=barrier)

    return _compile_error(load)


@pytest.mark.parametrize("case,expected", [
    (((64, 64), "float16", (0, 0), (64, 64), "float32"), "the TME copies bytes: A is float16 and tile is float32"),
    (((512, 16), "float16", (0, 0), (512, 16), "float16"), "box extent 512 of dimension 0 of A exceeds the engine's 256"),
    (((64, 4), "float16", (0, 0), (64, 4), "float16"), "dimension 0 of A has a stride of 8 bytes"),
])
def test_shapes_the_tme_cannot_express_are_errors_naming_the_rule(case, expected):
    assert expected in _load_error(*case)


def test_an_innermost_box_of_less_than_16_bytes_is_an_error():
    @T.prim_func
    def load(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 4), "float16")
            barrier = T.alloc_barrier(128)
            T.tma_copy(A[0, 0], tile, barrier=barrier)

    message = _compile_error(load)
    assert "innermost box dimension of A is 4 x 2 = 8 bytes; the TME moves multiples of 16 bytes" in message
    assert "T.tma_copy(A[0, 0], tile, barrier=barrier)" in message


def test_a_layout_the_engine_cannot_write_is_an_error_naming_it():
    @T.prim_func
    def load(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((64, 64), "float16")
            T.annotate_layout({tile: tilelang.layout.make_padded_layout(tile)})
            barrier = T.alloc_barrier(128)
            T.tma_copy(A, tile, barrier=barrier)

    message = _compile_error(load)
    assert "the layout of tile" in message and "is not one the TME writes" in message


def test_a_tensor_renumbered_by_annotate_layout_is_no_tme_operand():
    """A descriptor (dims and strides) cannot express a T.annotate_layout renumbering of a global tensor: T.tma_copy
    on one is an error naming it; a T.copy store to one stays the plain copy (test_global_layout.py runs those)."""

    @T.prim_func
    def main(A: T.Tensor((16, 64), "float16"), B: T.Tensor((16, 64), "float16")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_shared((16, 64), "float16")
            barrier = T.alloc_barrier(128)
            T.annotate_layout({A: T.Layout((16, 64), lambda i, j: (15 - i, j))})
            T.tma_copy(A[0, 0], tile, barrier=barrier)
            T.barrier_arrive(barrier)
            T.barrier_wait(barrier, 0)
            T.copy(tile, B[0, 0], disable_tma=True)

    with pytest.raises(tilelang.CompileError, match="A is accessed through its T.annotate_layout layout"):
        tilelang.compile(main, target=MP31)



def test_tma_store_wait_read_false_is_refused_naming_the_argument():
    """read=False (wait for the stores' global writes) is refused as Moore Threads' port refuses it (its SDK's only
    store wait is the read wait), when the kernel is compiled, as their test expects (`tilelang.lower` raises)."""
    @T.prim_func
    def wait(A: T.Tensor((64,), "float16")):
        with T.Kernel(1, threads=128):
            T.tma_store_wait(read=False)

    message = _compile_error(wait, target="musa -arch=mp_31")
    assert "MUSA T.tma_store_wait only supports read=True (got read=False)" in message, message
    assert "T.tma_store_wait(read=False)" in message, message


def test_tma_store_wait_count_other_than_zero_is_refused():
    with pytest.raises(tilelang.CompileError) as info:
        @T.prim_func
        def wait(A: T.Tensor((64,), "float16")):
            with T.Kernel(1, threads=128):
                T.tma_store_wait(1)
    message = str(info.value)
    assert "only T.tma_store_wait() (count 0) is supported" in message and "T.tma_store_wait(1)" in message, message
