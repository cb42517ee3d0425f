"""What ``Testnet.install`` sends: a canister's module source and class name.

A canister travels as Python source in ``install_code`` (``replica.execution.management``),
exactly as ``replica canister install`` sends it, so the deterministic and the live testnet
install the same thing and the state records the same module hash. A class is sent as the
source of the module that defines it (keep canisters in modules of their own: the whole
module runs on the replicas); source text needs ``class_name``.
"""

from __future__ import annotations

import inspect
import sys

from .errors import CanisterSourceError

__all__ = ["canister_module"]


def canister_module(canister: object, class_name: str | None = None) -> tuple[str, str]:
    """``(source, class name)`` of a canister class, or of source text plus ``class_name``."""
    if isinstance(canister, str):
        if not class_name:
            raise CanisterSourceError("installing source text needs class_name= (the canister class it defines)")
        return canister, class_name
    if not isinstance(canister, type):
        raise CanisterSourceError(f"install takes a canister class or source text, not {type(canister).__name__}")
    if "<locals>" in canister.__qualname__:
        raise CanisterSourceError(f"{canister.__qualname__} is defined inside a function: define canisters at "
                                  f"module level so their module's source can be installed")
    module = sys.modules.get(canister.__module__)
    try:
        source = inspect.getsource(module) if module is not None else None
    except (OSError, TypeError):
        source = None
    if not source:
        raise CanisterSourceError(f"the source of module {canister.__module__!r} (class {canister.__qualname__}) "
                                  f"is not available; pass the source text and class_name= instead")
    return source, class_name or canister.__qualname__
