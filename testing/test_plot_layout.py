"""tilelang.tools.plot_layout: pictures of fragments (thread:slot per element) and layouts (physical offsets over
the logical grid, or logical coordinates over the physical one), written in the requested formats."""

import pytest

from tilelang.layout import Fragment, make_full_bank_swizzled_layout
from tilelang.tools import plot_layout


def quad_fragment():
    """2x2 blocks of an 8x8 tile, one block a thread."""
    return Fragment([8, 8], lambda i, j: ((i // 2) * 4 + j // 2, (i % 2) * 2 + j % 2))


def test_fragment_cells_name_thread_and_slot(tmp_path, capsys):
    paths = plot_layout(quad_fragment(), save_directory=str(tmp_path), name="quad", formats="png", verbose=True)
    assert paths == [str(tmp_path / "quad.png")] and (tmp_path / "quad.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "(0, 0) -> T0:0" in printed and "(3, 5) -> T6:3" in printed and "(7, 7) -> T15:3" in printed


def test_layout_views_are_inverse_pictures(tmp_path, capsys):
    layout = make_full_bank_swizzled_layout(8, 64, 16)
    plot_layout(layout, save_directory=str(tmp_path), name="in", formats="svg", verbose=True)
    printed = capsys.readouterr().out
    assert "(1, 0) -> 72" in printed  # row 1's first chunk sits in its second physical chunk
    plot_layout(layout, save_directory=str(tmp_path), name="out", formats=["pdf", "png"], view="output", verbose=True)
    printed = capsys.readouterr().out
    assert "(0, 72) -> 1,0" in printed  # the physical grid is [512]: one row
    assert {p.name for p in tmp_path.iterdir()} == {"in.svg", "out.pdf", "out.png"}


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(TypeError, match="plot_layout expects a T.Layout or T.Fragment"):
        plot_layout([1, 2], save_directory=str(tmp_path))
    with pytest.raises(ValueError, match="unknown format 'jpg'"):
        plot_layout(quad_fragment(), save_directory=str(tmp_path), formats="jpg")
    with pytest.raises(ValueError, match=r"grid_shape \(3, 3\) does not hold the layout's 512 elements"):
        plot_layout(make_full_bank_swizzled_layout(8, 64, 16), save_directory=str(tmp_path), grid_shape=(3, 3))


def test_shared_layout_banks_show_the_swizzle(tmp_path, capsys):
    """fp16 rows of 64 (128 bytes, one row of the 32 4-byte banks): read down a column, the row-major tile hits one
    bank 8 times, the 128-byte bank swizzle 8 different banks. The picture colours each cell by its bank."""
    import numpy as np
    from matplotlib.image import imread

    import tilelang.language as T
    from tilelang.tools import bank_grid
    from tilelang_musa.tools.plot_layout import _bank_colormap

    swizzled = make_full_bank_swizzled_layout(8, 64, 16)
    row_major = T.Layout([8, 64], lambda i, j: (i * 64 + j,))
    banks = bank_grid(swizzled, "float16")
    assert banks.shape == (8, 64)
    assert banks[:, 0].tolist() == [0, 4, 8, 12, 16, 20, 24, 28]  # row r's first chunk is its r-th 16-byte chunk
    assert banks[0, :8].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]  # two fp16 elements a bank
    assert sorted(np.bincount(banks.reshape(-1)).tolist()) == [16] * 32  # every bank holds 16 elements
    assert bank_grid(row_major, "float16")[:, 0].tolist() == [0] * 8
    assert bank_grid(row_major, "float32", banks=16)[0, 15:18].tolist() == [15, 0, 1]

    (path,) = plot_layout(swizzled, save_directory=str(tmp_path), name="sw", formats="png", banks=True,
                          dtype="float16", verbose=True)
    printed = capsys.readouterr().out
    assert "(1, 0) -> b4" in printed and "(7, 63) -> b3" in printed  # row 7: chunk 7 <-> chunk 0
    assert "column conflicts: " + " ".join(["1x"] * 64) in printed
    plot_layout(row_major, save_directory=str(tmp_path), name="rm", formats="png", banks=True, dtype="float16",
                verbose=True)
    assert "column conflicts: " + " ".join(["8x"] * 64) in capsys.readouterr().out

    image = imread(path)  # a PNG matplotlib reads back: RGBA rows x columns
    assert image.ndim == 3 and image.shape[2] == 4 and image.shape[0] > 100 and image.shape[1] > 1000
    pixels = np.unique((image[..., :3] * 255).round().astype(int).reshape(-1, 3), axis=0)
    colours = (np.array(_bank_colormap(32).colors)[:, :3] * 255).round().astype(int)
    # every bank's colour is painted (in the cells' interiors)
    assert all(np.abs(pixels - c).max(axis=1).min() <= 1 for c in colours)


def test_banks_need_a_dtype_and_a_layout(tmp_path):
    with pytest.raises(ValueError, match="needs the tile's dtype"):
        plot_layout(make_full_bank_swizzled_layout(8, 64, 16), save_directory=str(tmp_path), banks=True)
    with pytest.raises(ValueError, match="a Fragment's elements live in registers"):
        plot_layout(quad_fragment(), save_directory=str(tmp_path), banks=True, dtype="float16")
