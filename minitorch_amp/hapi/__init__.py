"""Paddle's high-level helpers (``paddle.hapi``): :func:`summary`, also ``mt.summary``."""

from .model_summary import summary

__all__ = ["summary"]
