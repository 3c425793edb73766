"""Moore Threads' TileLang-MUSA module path `tilelang.musa` (scripts import `tilelang.musa.target`)."""
