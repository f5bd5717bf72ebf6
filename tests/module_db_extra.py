"""Module-table entries for the extra layers (merged into ``module_db.MODULES``)."""

from __future__ import annotations

from module_db import ModuleInfo  # noqa: F401

MODULES: list[ModuleInfo] = []
