"""The mechanism registry: every mechanism class registers itself, in its own module, by name.

A mechanism is added by writing its class, with the decorator, in a module of its own under
``mechanisms/edges/`` or ``mechanisms/features/`` (the shape of Opacus's ``register_grad_sampler``):
each package imports its modules that register one (:func:`import_registering_modules`), so nothing
else lists mechanisms. ``pipelines.yaml`` names a mechanism by
its ``name``; :func:`privgraph.mechanisms.build_mechanism` builds one from
:data:`MECHANISMS`.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

__all__ = ["MECHANISMS", "import_registering_modules", "register_mechanism"]

#: registry name (a mechanism's ``name``, as in ``pipelines.yaml``) -> its class
MECHANISMS: dict[str, type] = {}

M = TypeVar("M", bound=type)


def register_mechanism(cls: M) -> M:
    """Register the mechanism class ``cls`` under its ``name`` (a class decorator).

    Raises:
        TypeError: ``cls`` sets no ``name`` string of its own.
        ValueError: another class is registered under the same name.
    """
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__}: a mechanism sets its registry name as a class attribute 'name'")
    if MECHANISMS.get(name, cls) is not cls:
        raise ValueError(f"mechanism name {name!r} is taken by {MECHANISMS[name].__qualname__}")
    MECHANISMS[name] = cls
    return cls


def import_registering_modules(package: str, path: Iterable[str], decorator: str = "register_mechanism") -> None:
    """Import every module of ``package`` (found on ``path``) whose source applies ``decorator``
    to a class (a line ``@register_mechanism``, or ``@register_model(...)``), so that adding a
    mechanism or a model is adding its module. Modules that apply none are left to be imported
    where they are used (GAP's attention model imports torch)."""
    for info in sorted(pkgutil.iter_modules(list(path)), key=lambda m: m.name):
        source = Path(getattr(info.module_finder, "path", "")) / f"{info.name}.py"
        if not info.ispkg and source.is_file() and re.search(rf"^@{decorator}\b", source.read_text(encoding="utf-8"), re.M):
            importlib.import_module(f"{package}.{info.name}")
