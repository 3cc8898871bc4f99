"""Defects a review found (2026-11-28, night: transformer), each planted back: the tests written
with the fixes must see them."""

from __future__ import annotations

from mutant_sets import Mutant

MUTANTS: list[Mutant] = []
