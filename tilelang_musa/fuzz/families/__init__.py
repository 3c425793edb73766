"""The program families, registered in FAMILIES (tilelang_musa.fuzz.family) when imported."""

from . import elementwise  # noqa: F401

from . import copy  # noqa: F401
from . import reduce  # noqa: F401
from . import cumsum  # noqa: F401
from . import gemm  # noqa: F401
from . import softmax  # noqa: F401
from . import atomic  # noqa: F401
from . import pipeline  # noqa: F401
from . import warpspec  # noqa: F401
from . import tilecopy  # noqa: F401
from . import layout  # noqa: F401
from . import gemm_combo  # noqa: F401
from . import rownorm  # noqa: F401
from . import carried  # noqa: F401
