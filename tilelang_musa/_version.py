"""The package version: our own scheme, `<upstream TileLang API level>+musa.<our release>`."""

__version__ = "0.1.9+musa.0.1.0"
