"""quietcore: audit, measure and tune OS noise on Linux compute nodes."""

from quietcore._version import __version__

__all__ = ["__version__"]
