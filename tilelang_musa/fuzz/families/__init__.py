"""The program families, registered in FAMILIES (tilelang_musa.fuzz.family) when imported."""

from . import elementwise  # noqa: F401

from . import copy  # noqa: F401
from . import reduce  # noqa: F401
from . import cumsum  # noqa: F401
from . import gemm  # noqa: F401
from . import softmax  # noqa: F401
from . import atomic  # noqa: F401
