"""The vocabulary every layer of the compiler shares, at the bottom of the package.

`language/` (the frontend) writes it, `tileop/` and `transform/` read it, and nothing here imports any of them:

- `ops.py`: the names of the `tl.*` intrinsics and their registration as TVM Ops.
- `attrs.py`: annotation, attribute and storage-scope keys that travel on the IR between stages.
- `pass_config.py`: `PassConfigKey` and the validation of a user's `pass_configs`.
- `options.py`: `CompileOptions`, the typed options the passes and tile ops read, built once from the pass configs.
- `utils.py`: small IR helpers (dtype sizes, flat indices, statement sequences, thread extents).
- `structural_memo.py`: values computed from immutable IR objects, kept by structure across compiles.
- `trace.py`: the frontend's open kernel traces, for code below it that builds IR on its behalf (tile ops).

Import the submodules directly (`from ..ir.attrs import WS_ATTR`); this package re-exports nothing.
"""
