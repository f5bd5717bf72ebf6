"""Module-table entries for the grid layers (merged into ``module_db.MODULES``)."""

from __future__ import annotations

from module_db import ModuleInfo  # noqa: F401

MODULES: list[ModuleInfo] = []
