"""The canister SDK, as apps import it::

    from replica.sdk import Canister, update, query, callback, CallError, Trap

See ``replica.execution.canister`` for the programming model. ``encode_value`` makes the
payload bytes of an argument (maps in any key order), ``decode_payload`` reads a reply.
``MANAGEMENT_CANISTER_ID`` is the management canister's id, for
``self.call(MANAGEMENT_CANISTER_ID, "raw_rand", None, on_reply=..., on_reject=...)``.
"""

from state_manager.messages import MANAGEMENT_CANISTER_ID, RejectCode

from .execution.canister import Canister, callback, query, update
from .execution.codec import decode_payload, encode_value
from .execution.errors import ApiUsageError, CallError, Trap

__all__ = [
    "Canister", "update", "query", "callback", "CallError", "Trap", "ApiUsageError", "RejectCode",
    "encode_value", "decode_payload", "MANAGEMENT_CANISTER_ID",
]
