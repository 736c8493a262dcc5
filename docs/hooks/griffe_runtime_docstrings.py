"""griffe extension: take a class docstring from the imported class when the source builds it at run time.

The estimators assemble ``__doc__`` from shared parameter text
(``__doc__ = "..." + _COMMON_DOC + ...``), which static analysis cannot read.
"""

from __future__ import annotations

import importlib
from typing import Any

import griffe


class RuntimeDocstrings(griffe.Extension):
    """Fill a class's missing docstring from ``module.Class.__doc__`` after import."""

    def on_class_instance(self, *, node: Any, cls: griffe.Class, agent: Any, **kwargs: Any) -> None:
        if cls.docstring is not None and cls.docstring.value.strip():
            return
        try:
            module = importlib.import_module(cls.module.path)
            doc = getattr(getattr(module, cls.name), "__doc__", None)
        except (ImportError, AttributeError):
            return
        if doc:
            import inspect

            cls.docstring = griffe.Docstring(inspect.cleandoc(doc), parent=cls, parser=griffe.Parser.numpy)
