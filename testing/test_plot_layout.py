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
