"""The device an upstream-style script tunes for: `driver` answers the MUSA runtime's queries."""

from . import driver  # noqa: F401
