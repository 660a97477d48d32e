"""Serves a mutated module through an import hook: the working tree is never written.

Installed only in the forked child that runs one mutant's tests, before anything imports
the engine; the module's file on disk, and every other process, keep the real code.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType


class _MutantLoader(importlib.abc.Loader):
    def __init__(self, code: CodeType, origin: str) -> None:
        self.code = code
        self.origin = origin

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        module.__file__ = self.origin
        exec(self.code, module.__dict__)


class MutantFinder(importlib.abc.MetaPathFinder):
    """Finds ``name`` as the compiled mutant; every other module the usual way."""

    def __init__(self, name: str, code: CodeType, origin: str) -> None:
        self.name = name
        self.loader = _MutantLoader(code, origin)
        self.origin = origin

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_loader(fullname, self.loader, origin=self.origin)


def install(name: str, code: CodeType, origin: str) -> None:
    """Make ``import name`` run ``code``; the module must not have been imported yet."""
    if name in sys.modules:
        raise RuntimeError(f"{name} was imported before its mutant was installed")
    sys.meta_path.insert(0, MutantFinder(name, code, origin))
