"""The one root of the state manager's exceptions.

Every exception class defined in ``state_manager`` derives from ``StateManagerError``. Each
module keeps its own family under it (``CodecError``, ``CertificationError``,
``SliceDecodeError``, ...), and keeps the built-in base its callers catch (most are
``ValueError``s; a ``LabelNotFoundError`` is also a ``KeyError``, a ``StableValueError`` a
``TypeError``), so ``except StateManagerError`` catches whatever this package refuses while
narrower handlers keep working.

Classes in modules that ``setup.py`` compiles stay ordinary Python classes there
(``mypyc_attr(native_class=False)``), so they can have this base and be raised, caught and
pickled like any exception.
"""

from __future__ import annotations

__all__ = ["StateManagerError"]


class StateManagerError(Exception):
    """Base of every error raised by a ``state_manager`` module."""
