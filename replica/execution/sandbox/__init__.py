"""The canister sandbox: the allowed subset, deterministic run time, instruction metering.

A canister module given as source (``source_modules``) is parsed, checked against the
subset (``subset``), instrumented with instruction charges (``metering``, with ``syntax``
for the unit's node count and the nodes it builds), compiled once per
module hash and run with restricted builtins (``safe_builtins``) and an instruction meter
(``meter``, ``operations``). Its classes are frozen and its module-level values immutable
(``values``); sets iterate in insertion order (``ordered_set``); ``self.stable`` is a
charged view (``stable_view``). ``loader`` puts it together. This is a determinism and
resource-accounting layer inside the node's process, not a security boundary (README).
"""

from .loader import LoadedModule, load_sandboxed
from .meter import InstructionLimitExceeded, Meter, SandboxFault
from .operations import Sandbox
from .stable_view import StableView, stable_state_bytes

__all__ = [
    "LoadedModule", "load_sandboxed", "Meter", "Sandbox", "SandboxFault", "InstructionLimitExceeded",
    "StableView", "stable_state_bytes",
]
