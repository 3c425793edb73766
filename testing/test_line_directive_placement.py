"""Where `tl.emit_line_directives` puts its `#line N "file.py"` directives, as upstream TileLang prints them
(CodeGenCWithLineDirectives, its test_tilelang_codegen_line_directives): one before every statement's first line of
code, re-written for a second statement of the same Python line (without it the second would be numbered N+1), and
one at the kernel's entry naming its `def` line. A lowered tile op's statements name the `T.*` call's line, a
macro's statements the macro body's lines, and T.Pipelined's prologue, steady loop and epilogue the lines of the
statements they repeat (the waits and barriers the pipeline adds, the T.Pipelined line). A compiler error in the
simulator's build names the user's line."""

import inspect
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.errors import BuildError

ARCHS = ["mp_22", "mp_31"]
LINES = {"tl.emit_line_directives": True}
HERE = inspect.getsourcefile(lambda: None)
DIRECTIVE = re.compile(r'^#line (\d+) "(.*)"$')


def line_of(marker: str) -> int:
    with open(HERE) as f:
        return next(n for n, text in enumerate(f, 1) if marker in text and "line_of(" not in text)


def directive_before(source: str, pattern: str, nth: int = 0) -> tuple[int, str]:
    """The (line, file) of the directive right before the `nth` generated line matching `pattern`; fails when the
    line before it is not a directive."""
    lines = source.splitlines()
    hits = [k for k, text in enumerate(lines) if re.search(pattern, text) and not text.startswith("#line ")]
    assert len(hits) > nth, f"no generated line {nth} matches {pattern!r}:\n{source}"
    match = DIRECTIVE.match(lines[hits[nth] - 1])
    assert match, f"no directive right before {lines[hits[nth]]!r}:\n{source}"
    return int(match.group(1)), match.group(2)


def statement_kinds():
    @T.prim_func
    def kinds(A: T.Tensor((128,), "float32"), B: T.Tensor((256,), "float32"), C: T.Tensor((8,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tile = T.alloc_shared((128,), "float32")  # the allocation
            T.copy(A, tile)  # the tile op
            for i in T.Parallel(128):  # the parallel loop
                B[bx * 128 + i] = tile[i] * 2.0 + 1.0  # the store
            if bx == 1:  # the branch
                C[0] = A[0] + 4.0; C[1] = A[1] + 5.0  # two statements
            for j in T.serial(2):  # the serial loop
                s = A[j] * 3.0  # the binding
                C[bx * 4 + 2 + j] = s - 1.0  # the serial store

    return kinds


def run_kinds(kernel):
    a = rand((128,), torch.float32)
    b = torch.full((256,), float("nan"))
    c = torch.full((8,), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(b, torch.cat([a * 2.0 + 1.0] * 2))
    for bx in range(2):
        torch.testing.assert_close(c[bx * 4 + 2:bx * 4 + 4], a[:2] * 3.0 - 1.0)
    torch.testing.assert_close(c[:2], a[:2] + torch.tensor([4.0, 5.0]))


@pytest.mark.parametrize("arch", ARCHS)
def test_every_statement_kind_has_its_directive_right_before_it(arch):
    kernel = tilelang.compile(statement_kinds(), target=f"musa -arch={arch}", pass_configs=LINES)
    source = kernel.get_kernel_source()
    expected = {
        r"float\* tile = ": "# the allocation",
        r"tile \+ .* = \*reinterpret_cast<float4\*>\(A ": "# the tile op",
        r"B \+ .* = ": "# the store",
        r"if \(\(\(int\)blockIdx.x\) == 1\)": "# the branch",
        r"for \(int j = 0": "# the serial loop",
        r"const float s = ": "# the binding",
        r"C\[.*\] = s - ": "# the serial store",
    }
    for pattern, marker in expected.items():
        assert directive_before(source, pattern) == (line_of(marker), HERE), pattern
    run_kinds(kernel)


@pytest.mark.parametrize("arch", ARCHS)
def test_two_statements_of_one_line_each_get_the_directive(arch):
    """Upstream's no-deduplication rule: after `#line N` the next line is N+1, so the second statement of line N
    needs its own `#line N`."""
    source = tilelang.compile(statement_kinds(), target=f"musa -arch={arch}", pass_configs=LINES).get_kernel_source()
    two = line_of("# two statements")
    assert directive_before(source, r"C\[0\] = ") == (two, HERE)
    assert directive_before(source, r"C\[1\] = ") == (two, HERE)
    assert source.count(f'#line {two} "{HERE}"\n') == 2


@pytest.mark.parametrize("arch", ARCHS)
def test_the_kernel_entry_names_the_def_line(arch):
    """The first line of the body is the directive of the `def` line (not the decorator's), as upstream anchors the
    function entry to the PrimFunc's span; the program and its lowered kernel carry that span."""
    from tilelang_musa.ir.source_lines import user_line

    program = statement_kinds()
    def_line = line_of("def kinds(")
    assert user_line(program.span) == (HERE, def_line)
    source = tilelang.compile(program, target=f"musa -arch={arch}", pass_configs=LINES).get_kernel_source()
    lines = source.splitlines()
    entry = next(k for k, text in enumerate(lines) if "__global__" in text)
    assert lines[entry + 1] == f'#line {def_line} "{HERE}"'


def two_kernels():
    @T.prim_func
    def twice(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = A[i] + 1.0  # the first kernel's store
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = B[i] * 2.0  # the second kernel's store

    return twice


@pytest.mark.parametrize("arch", ARCHS)
def test_each_kernel_of_a_program_names_the_def_line(arch):
    kernel = tilelang.compile(two_kernels(), target=f"musa -arch={arch}", pass_configs=LINES)
    source = kernel.get_kernel_source()
    lines = source.splitlines()
    entries = [k for k, text in enumerate(lines) if "__global__" in text]
    assert len(entries) == 2
    assert all(lines[k + 1] == f'#line {line_of("def twice(")} "{HERE}"' for k in entries)
    assert directive_before(source, r"B \+ .* = .*A \+") == (line_of("# the first kernel's store"), HERE)
    assert directive_before(source, r"B \+ .* = .*B \+") == (line_of("# the second kernel's store"), HERE)
    a = rand((128,), torch.float32)
    b = torch.full((128,), float("nan"))
    kernel(a, b)
    torch.testing.assert_close(b, (a + 1.0) * 2.0)


@T.macro
def add_rows(A, B, row):
    B[row, 0] = A[row, 0] + 5.0  # the macro's first store
    B[row, 1] = A[row, 1] - 5.0  # the macro's second store


def calls_a_macro():
    @T.prim_func
    def with_macro(A: T.Tensor((8, 4), "float32"), B: T.Tensor((8, 4), "float32")):
        with T.Kernel(8, threads=32) as bx:
            for j in T.serial(4):
                B[bx, j] = A[bx, j]  # the copy before the macro
            add_rows(A, B, bx)  # the macro call

    return with_macro


@pytest.mark.parametrize("arch", ARCHS)
def test_each_statement_of_a_macro_names_its_line_in_the_macro(arch):
    kernel = tilelang.compile(calls_a_macro(), target=f"musa -arch={arch}", pass_configs=LINES)
    source = kernel.get_kernel_source()
    assert directive_before(source, r"5\.000000e\+00f") == (line_of("# the macro's first store"), HERE)
    assert directive_before(source, r"- 5\.000000e\+00f") == (line_of("# the macro's second store"), HERE)
    a = rand((8, 4), torch.float32)
    b = torch.full((8, 4), float("nan"))
    kernel(a, b)
    expected = a.clone()
    expected[:, 0] += 5.0
    expected[:, 1] -= 5.0
    torch.testing.assert_close(b, expected)


def pipelined_gemm():
    @T.prim_func
    def gemm(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((64, 32), "float16")  # tile a
            b = T.alloc_shared((32, 64), "float16")  # tile b
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(2, num_stages=2):  # the pipelined loop
                T.copy(A[by * 64, k * 32], a)  # load a
                T.copy(B[k * 32, bx * 64], b)  # load b
                T.gemm(a, b, acc)  # the gemm
            T.copy(acc, C[by * 64, bx * 64])

    return gemm


@pytest.mark.parametrize("arch", ARCHS)
def test_the_statements_of_a_pipelined_loop_keep_their_lines(arch):
    """mp_22 pipelines the loads as asynchronous copies (prologue, steady loop, epilogue: InjectSoftwarePipeline),
    mp_31 as TME loads in a producer squad (WarpSpecializePipeline): every repeated load names its T.copy line, the
    gemms theirs, the loops and the waits the pipeline adds the T.Pipelined line. They used to name the kernel's
    `with T.Kernel` line (mp_22) or the `def` (mp_31): the passes rebuilt them without their spans."""
    kernel = tilelang.compile(pipelined_gemm(), target=f"musa -arch={arch}", pass_configs=LINES)
    source = kernel.get_kernel_source()
    load = r"tl::cp_async_gs_conditional<16>\(&{}\[" if arch == "mp_22" else r"tl::tma_load<.*&{}\["
    loads = {"a": line_of("# load a"), "b": line_of("# load b")}
    for tile, line in loads.items():
        count = len(re.findall(load.format(tile), source))
        assert count == (2 if arch == "mp_22" else 1)  # mp_22: the prologue's and the steady loop's
        for nth in range(count):
            assert directive_before(source, load.format(tile), nth) == (line, HERE)
    gemms = len(re.findall(r"tl::gemm_ss_", source))
    assert gemms >= 1
    for nth in range(gemms):
        assert directive_before(source, r"tl::gemm_ss_", nth) == (line_of("# the gemm"), HERE)
    pipelined = line_of("# the pipelined loop")
    wait = r"tl::cp_async_wait<" if arch == "mp_22" else r"tl::barrier_wait\("
    assert directive_before(source, wait) == (pipelined, HERE)
    assert directive_before(source, r"for \(int k") == (pipelined, HERE)
    assert directive_before(source, r"half_t\* a = ") == (line_of("# tile a"), HERE)
    assert directive_before(source, r"half_t\* b = ") == (line_of("# tile b"), HERE)
    a = rand((128, 64), torch.float16)
    b = rand((64, 128), torch.float16, seed=1)
    c = torch.full((128, 128), float("nan"))
    kernel(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def calls_an_undefined_function():
    @T.prim_func
    def undefined(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = T.call_extern("float32", "no_such_device_function", A[i])  # the undefined call

    return undefined


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("configs", [LINES, {}], ids=["directives", "side_table"])
def test_a_compiler_error_in_the_simulator_build_names_the_users_line(arch, configs):
    """The simulator builds the source with the directives blanked (its reports name the generated lines), so the
    compiler's diagnostics are given the user's line from the mapping: `file.py:N:col: error: ... (line M of the
    kernel source)`, as the directives would have made it print; without the option, from the side table."""
    with pytest.raises(BuildError) as info:
        tilelang.compile(calls_an_undefined_function(), target=f"musa -arch={arch}", pass_configs=configs)
    message = str(info.value)
    located = re.search(rf"^{re.escape(HERE)}:(\d+):\d+: error: .*no_such_device_function.*"
                        r"\(line (\d+) of the kernel source\)$", message, re.M)
    assert located, message
    assert int(located.group(1)) == line_of("# the undefined call")


def test_compiler_diagnostics_of_other_files_and_unmapped_lines_stay_as_they_are():
    from tilelang_musa.ir.source_lines import name_user_lines_of_build

    lines = {12: ("k.py", 40)}
    message = "\n".join(["/w/k.checked.mu: In function 'void k_kernel()':",
                         "/w/k.checked.mu:12:7: error: 'f' was not declared in this scope",
                         "/w/k.checked.mu:30:1: error: expected ';'",
                         "/x/common.h:12:3: note: declared here"])
    assert name_user_lines_of_build(message, "k.checked.mu", lines).splitlines() == [
        "/w/k.checked.mu: In function 'void k_kernel()':",
        "k.py:40:7: error: 'f' was not declared in this scope (line 12 of the kernel source)",
        "/w/k.checked.mu:30:1: error: expected ';'",
        "/x/common.h:12:3: note: declared here"]


def test_a_rebuilt_allocation_keeps_a_nested_statements_span():
    """AllocBuffer's Python constructor refuses a SequentialSpan (what a statement nested in `with T.Kernel` has):
    keep_span builds it through the FFI constructor, so a pass that re-allocates a tile (a pipelined tile's
    versions) keeps the allocation's line."""
    from tvm import ir, tirx

    from tilelang_musa.ir.source_lines import keep_span, user_line

    tile = tirx.decl_buffer((4,), "float32", scope="shared")
    nested = ir.SequentialSpan([ir.Span(ir.SourceName("k.py"), 3, 3, 0, 0), ir.Span(ir.SourceName("k.py"), 5, 5, 4, 4)])
    old = tirx._ffi_api.AllocBuffer(tile, {}, nested)
    kept = keep_span(old, tirx.AllocBuffer(tirx.decl_buffer((2, 4), "float32", scope="shared"), {"kept": 1}))
    assert isinstance(kept, tirx.AllocBuffer)
    assert user_line(kept.span) == ("k.py", 5)
    assert tuple(kept.buffer.ty.shape) == (2, 4) and int(kept.annotations["kept"]) == 1


@pytest.mark.parametrize("arch", ARCHS)
def test_a_compiler_error_in_a_batched_simulator_build_names_the_users_line(arch):
    """batch_build's one-by-one build of the program that failed the joint one (the fuzzer's path) gives the same
    located message as tilelang.compile."""
    from tilelang_musa.jit.batch_build import build_together
    from tilelang_musa.jit.compile import compile_deferred

    (error,) = build_together([compile_deferred(calls_an_undefined_function(), target=f"musa -arch={arch}")])
    assert isinstance(error, BuildError)
    located = re.search(rf"^{re.escape(HERE)}:(\d+):\d+: error: .*no_such_device_function", str(error), re.M)
    assert located, str(error)
    assert int(located.group(1)) == line_of("# the undefined call")
