"""The execution layer: canister SDK, runtime, scheduler and management operations.

Modules, one job each:

* ``canister``          the SDK's ``Canister`` base class and ``@update/@query/@callback``
* ``system_api``        what one running message may read and the effects it buffers
* ``runtime``           running a method; the reply/trap rules on its outcome
* ``call_contexts``     answering call contexts and closing them
* ``message_execution`` ingress, request and response execution
* ``scheduler``         fair, bounded choice of the next canister and input queue
* ``environment``       ``ExecutionEnvironment.execute_round`` (message_routing's Protocol)
* ``query``             read-only queries
* ``management``        the management canister (create_canister, install_code), direct
                        installs at genesis, stop / start
* ``management_requests`` canisters' calls to the management canister: ``raw_rand``
* ``registry``          builtin modules: module names, module hashes, name → class
* ``source_modules``    modules given as source: hash, load, per-process cache
* ``codec``             values on the wire
* ``errors``            the exceptions
"""

from .environment import ExecutionEnvironment
from .management import MANAGEMENT_CANISTER_ID, install_canister, install_code, start_canister, stop_canister
from .query import run_query
from .registry import CanisterRegistry, module_hash, module_name_of
from .source_modules import SourceModules, source_module_hash

__all__ = [
    "ExecutionEnvironment", "CanisterRegistry", "module_name_of", "module_hash", "install_canister",
    "stop_canister", "start_canister", "run_query", "MANAGEMENT_CANISTER_ID", "install_code", "SourceModules",
    "source_module_hash",
]
