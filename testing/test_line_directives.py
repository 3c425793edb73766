"""`tl.emit_line_directives`: the MUSA C names the user's Python lines with `#line N "file.py"` (the frontend gives
every statement the user's line as its span, passes keep it, the printer writes it), and one mapping from a
generated line to the user's line (ir/source_lines.py `user_lines`) serves the kernel object and the simulator's
reports, which keep naming the generated line (the sanitizer build has the directives blanked) and add the
user's. Off by default: then the source has no directive and is otherwise the same."""

import inspect
import re

import pytest
import torch

import tilelang
import tilelang.language as T
from conftest import rand
from tilelang_musa.ir.source_lines import user_lines
from tilelang_musa.launcher import KernelLaunchError

ARCHS = ["mp_22", "mp_31"]
LINES = {"tl.emit_line_directives": True}
HERE = inspect.getsourcefile(lambda: None)


def scale_rows():
    @T.prim_func
    def scale(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(4, threads=128) as bx:
            tile = T.alloc_shared((16, 32), "float32")
            T.copy(A[bx * 16, 0], tile)
            for i, j in T.Parallel(16, 32):
                B[bx * 16 + i, j] = tile[i, j] * 3.0 + 1.0  # the store
            if bx == 0:
                B[0, 0] = -7.0  # the guarded store

    return scale


def user_line_of(snippet: str) -> int:
    lines, first = inspect.getsourcelines(scale_rows)
    return first + next(k for k, text in enumerate(lines) if snippet in text)


def generated_line_of(source: str, snippet: str) -> int:
    return next(number for number, text in enumerate(source.splitlines(), 1) if snippet in text)


@pytest.mark.parametrize("arch", ARCHS)
def test_directives_name_the_user_lines_and_the_kernel_still_runs(arch):
    kernel = tilelang.compile(scale_rows(), target=f"musa -arch={arch}", pass_configs=LINES)
    source = kernel.get_kernel_source(kernel_only=False)
    assert f'#line {user_line_of("# the store")} "{HERE}"' in source
    mapping = user_lines(source)
    assert mapping[generated_line_of(source, "-7.0")] == (HERE, user_line_of("# the guarded store"))
    assert mapping[generated_line_of(source, "if (")] == (HERE, user_line_of("if bx == 0"))
    assert mapping[generated_line_of(source, "3.000000e+00f")] == (HERE, user_line_of("# the store"))
    assert generated_line_of(source, "extern \"C\" int call(") not in mapping  # the host wrapper is its own
    a = rand((64, 32), torch.float32)
    b = torch.full((64, 32), float("nan"))
    kernel(a, b)
    expected = a * 3.0 + 1.0
    expected[0, 0] = -7.0
    torch.testing.assert_close(b, expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_off_by_default_and_the_directives_are_the_only_difference(arch):
    plain = tilelang.compile(scale_rows(), target=f"musa -arch={arch}").get_kernel_source(kernel_only=False)
    lined = tilelang.compile(scale_rows(), target=f"musa -arch={arch}",
                             pass_configs=LINES).get_kernel_source(kernel_only=False)
    assert "#line" not in plain
    assert "\n".join(line for line in lined.splitlines() if not line.startswith("#line ")) == \
        "\n".join(plain.splitlines())


def shifted_read():
    @T.prim_func
    def shifted(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i + 3]  # reads past A

    return shifted


@pytest.mark.parametrize("arch", ARCHS)
def test_a_bounds_report_names_the_generated_line_and_the_users(arch):
    kernel = tilelang.compile(shifted_read(), target=f"musa -arch={arch}",
                              pass_configs={**LINES, "tl.disable_safe_memory_legalize": True})
    source = kernel.get_kernel_source(kernel_only=False)
    with pytest.raises(KernelLaunchError) as info:
        kernel(rand((256,), torch.float32), torch.full((256,), float("nan")))
    message = str(info.value)
    lines, first = inspect.getsourcelines(shifted_read)
    user = first + next(k for k, text in enumerate(lines) if "# reads past A" in text)
    generated = generated_line_of(source, "A[")
    assert f"line {generated} of the kernel source; {HERE}:{user} in the user's source" in message, message


def fragment_never_written():
    @T.prim_func
    def fragment_bug(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            F = T.alloc_fragment((128,), "float32")
            for i in T.Parallel(128):
                B[bx * 128 + i] = F[i] + A[bx * 128 + i]  # F is never written

    return fragment_bug


@pytest.mark.parametrize("arch", ARCHS)
def test_a_checked_mode_uninitialised_read_names_the_users_line(arch, monkeypatch):
    kernel = tilelang.compile(fragment_never_written(), target=f"musa -arch={arch}", pass_configs=LINES)
    source = kernel.get_kernel_source(kernel_only=False)
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(rand((256,), torch.float32), torch.full((256,), float("nan")))
    message = str(info.value)
    lines, first = inspect.getsourcelines(fragment_never_written)
    user = first + next(k for k, text in enumerate(lines) if "# F is never written" in text)
    assert "uninitialised read" in message, message
    generated = int(re.search(r"line (\d+) of the kernel source", message).group(1))
    assert "F" in source.splitlines()[generated - 1]  # the generated line, as the simulator names it
    assert user_lines(source)[generated] == (HERE, user)
    assert f"line {generated} of the kernel source; {HERE}:{user} in the user's source" in message, message


def test_the_mapping_follows_the_c_numbering_and_stops_at_the_units_own_file():
    text = "\n".join(['int a;', '#line 40 "k.py"', 'x = 1;', 'y = 2;', '#line 12 "k.py"', 'z = 3;',
                      '#line 7 "k_kernel.mu"', 'host();'])
    assert user_lines(text) == {3: ("k.py", 40), 4: ("k.py", 41), 6: ("k.py", 12)}


def test_every_report_kind_that_names_a_generated_line_gets_the_users():
    from tilelang_musa.ir.source_lines import name_user_lines

    lines = {5: ("k.py", 40), 9: ("k.py", 44)}
    assert name_user_lines("load of `A` (line 5 of the kernel source)", lines) == \
        "load of `A` (line 5 of the kernel source; k.py:40 in the user's source)"
    assert name_user_lines("its last checked memory access was x at line 9 of the generated source", lines) == \
        "its last checked memory access was x at line 9 of the generated source; k.py:44 in the user's source"
    race = ("data race on byte 4 of shared `S`: this thread loads it at line 9 while thread (3,0,0) stored it at "
            "line 5, with no barrier between them (line numbers of the kernel source)")
    assert name_user_lines(race, lines) == race.replace("at line 9", "at line 9 (k.py:44)").replace(
        "at line 5", "at line 5 (k.py:40)")
    assert name_user_lines("line 6 of the kernel source", lines) == "line 6 of the kernel source"  # unmapped


@T.macro
def bump(A, B, row):
    B[row, 0] = A[row, 0] + 5.0  # the macro's store (every thread stores the same value)


def calls_a_macro():
    @T.prim_func
    def with_macro(A: T.Tensor((8, 4), "float32"), B: T.Tensor((8, 4), "float32")):
        with T.Kernel(8, threads=32) as bx:
            for j in T.serial(4):
                B[bx, j] = A[bx, j]
            bump(A, B, bx)

    return with_macro


@pytest.mark.parametrize("arch", ARCHS)
def test_a_statement_of_a_macro_names_the_macro_bodys_line(arch):
    kernel = tilelang.compile(calls_a_macro(), target=f"musa -arch={arch}",
                              pass_configs=LINES)
    source = kernel.get_kernel_source(kernel_only=False)
    with open(HERE) as f:
        user = next(n for n, text in enumerate(f, 1) if "# the macro's store" in text and "B[row" in text)
    assert user_lines(source)[generated_line_of(source, "5.000000e+00f")] == (HERE, user)
    a = rand((8, 4), torch.float32)
    b = torch.full((8, 4), float("nan"))
    kernel(a, b)
    expected = a.clone()
    expected[:, 0] += 5.0
    torch.testing.assert_close(b, expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_without_the_option_a_bounds_report_still_names_the_users_line(arch):
    kernel = tilelang.compile(shifted_read(), target=f"musa -arch={arch}",
                              pass_configs={"tl.disable_safe_memory_legalize": True})
    source = kernel.get_kernel_source(kernel_only=False)
    assert "#line" not in source  # the printed C is as before; the mapping is a side table beside the stages
    with pytest.raises(KernelLaunchError) as info:
        kernel(rand((256,), torch.float32), torch.full((256,), float("nan")))
    message = str(info.value)
    lines, first = inspect.getsourcelines(shifted_read)
    user = first + next(k for k, text in enumerate(lines) if "# reads past A" in text)
    generated = generated_line_of(source, "A[")
    assert f"line {generated} of the kernel source; {HERE}:{user} in the user's source" in message, message


@pytest.mark.parametrize("arch", ARCHS)
def test_without_the_option_an_uninitialised_read_names_the_users_line(arch, monkeypatch):
    kernel = tilelang.compile(fragment_never_written(), target=f"musa -arch={arch}")
    source = kernel.get_kernel_source(kernel_only=False)
    assert "#line" not in source
    monkeypatch.setenv("TILELANG_SIM_CHECK", "1")
    with pytest.raises(KernelLaunchError) as info:
        kernel(rand((256,), torch.float32), torch.full((256,), float("nan")))
    message = str(info.value)
    lines, first = inspect.getsourcelines(fragment_never_written)
    user = first + next(k for k, text in enumerate(lines) if "# F is never written" in text)
    generated = int(re.search(r"line (\d+) of the kernel source", message).group(1))
    assert "F" in source.splitlines()[generated - 1]
    assert f"line {generated} of the kernel source; {HERE}:{user} in the user's source" in message, message


def test_the_side_table_is_the_directives_mapping_renumbered():
    from tilelang_musa.ir.source_lines import table_from_json, table_to_json, user_lines_of_plain

    lined = "\n".join(['int a;', '#line 40 "k.py"', 'x = 1;', 'y = 2;', '#line 12 "k.py"', 'z = 3;',
                       '#line 9 "k_kernel.mu"', 'host();'])
    table = user_lines_of_plain(lined)
    assert table == {2: ("k.py", 40), 3: ("k.py", 41), 4: ("k.py", 12)}
    assert table_from_json(table_to_json(table)) == table


def small_gemm():
    @T.prim_func
    def gemm(A: T.Tensor((128, 64), "float16"), B: T.Tensor((64, 128), "float16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            a = T.alloc_shared((64, 32), "float16")
            b = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.clear(acc)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[by * 64, k * 32], a)
                T.copy(B[k * 32, bx * 64], b)
                T.gemm(a, b, acc)
            T.copy(acc, C[by * 64, bx * 64])

    return gemm


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("program", [scale_rows, shifted_read, calls_a_macro, small_gemm])
def test_the_one_print_with_directives_gives_the_plain_source(program, arch):
    """The simulator's compile prints each kernel once, with directives, and takes the plain source from it (the
    directive lines left out): byte for byte the printer's own print without directives, on kernels with tile
    copies, a pipelined GEMM, a macro's lines and a guarded store."""
    from tilelang_musa.codegen import generate
    from tilelang_musa.target import determine_target
    from tilelang_musa.transform import lower_program, normalize_pass_configs

    target = determine_target(f"musa -arch={arch}")
    funcs = lower_program(program(), target, normalize_pass_configs({}))
    plain = generate(funcs, target, "k", sim_checks=True)
    one_print = generate(funcs, target, "k", sim_checks=True, user_line_table=True)
    assert one_print.device_user_lines, "the table of user lines is empty"
    assert "#line" not in one_print.device
    assert (one_print.device, one_print.checked_text, one_print.host) == (plain.device, plain.checked_text,
                                                                          plain.host)


def binds_in_a_vectorized_loop():
    @T.prim_func
    def bound(A: T.Tensor((128, 8), "float32"), B: T.Tensor((128, 8), "float16")):
        with T.Kernel(1, threads=128):
            for i, j in T.Parallel(128, 8):

                y = A[i, j] * 2.0  # the binding

                B[i, j] = T.cast(y, "float16")  # the store

    return bound


@pytest.mark.parametrize("arch", ARCHS)
def test_a_binding_that_vectorize_loop_rebuilds_keeps_its_line(arch):
    kernel = tilelang.compile(binds_in_a_vectorized_loop(), target=f"musa -arch={arch}", pass_configs=LINES)
    source = kernel.get_kernel_source(kernel_only=False)
    lines, first = inspect.getsourcelines(binds_in_a_vectorized_loop)
    user = {tag: first + next(k for k, text in enumerate(lines) if tag in text)
            for tag in ("# the binding", "# the store")}
    mapping = user_lines(source)
    assert "const float4 y" in source
    assert mapping[generated_line_of(source, "const float4 y")] == (HERE, user["# the binding"])
    assert mapping[generated_line_of(source, "vec_cast<half_t>")] == (HERE, user["# the store"])
    a = rand((128, 8), torch.float32)
    b = torch.full((128, 8), float("nan"), dtype=torch.float16)
    kernel(a, b)
    torch.testing.assert_close(b, (a * 2.0).half())


@pytest.mark.parametrize("arch", ARCHS)
def test_lower_prints_the_directives_of_a_compile(arch):
    """`tilelang.lower` honours the option as `tilelang.compile` does, given as `pass_configs` or by an
    enclosing PassContext (upstream's test_tilelang_codegen_line_directives lowers so): its kernel source is
    the compiled kernel's. It used to print the kernels without directives whatever the option said."""
    from tilelang import tvm

    target = f"musa -arch={arch}"
    compiled = tilelang.compile(scale_rows(), target=target, pass_configs=LINES).get_kernel_source()
    given = tilelang.lower(scale_rows(), target=target, pass_configs=LINES).kernel_source
    with tvm.transform.PassContext(config=LINES):
        enclosed = tilelang.lower(scale_rows(), target=target).kernel_source
    assert f'#line {user_line_of("# the store")} "{HERE}"' in given
    assert given == enclosed == compiled
    assert "#line" not in tilelang.lower(scale_rows(), target=target).kernel_source
