"""Methods that declare Candid types: their arguments decoded from Candid, their replies
encoded to it (docs/architecture.md, *Candid methods*).

``@update(candid="(text, nat) -> (record { ok : bool })")`` (or ``@query(candid=...)``)
declares a method's types; names come from the class's ``CANDID_TYPES`` text (``type
Account = record { ... };``). The method takes one parameter per argument type and its return
value is the result: the value itself for one result type, a tuple for several, None for
none. Without a declaration a method keeps msgpack (``codec``), and so do inter-canister
calls between our canisters (``self.call`` encodes with msgpack).

Decoding runs before the method, outside its instruction meter, bounded by the decoder's
work quota (``replica.ic.candid.decode``): a malformed or ill-typed argument is a reject, the
method does not run. Encoding a reply is charged to the meter of a sandboxed canister (one
instruction per value).
"""

from __future__ import annotations

from typing import Any

from replica.ic import candid
from replica.ic.errors import CandidError
from state_manager.encoding import EncodingError

from .errors import CanisterDefinitionError

__all__ = ["INTERFACE_METHOD", "compile_signature", "compile_definitions", "decode_arguments", "encode_result",
           "interface_text"]

#: The query IC canisters answer with their Candid service description.
INTERFACE_METHOD = "__get_candid_interface_tmp_hack"
INTERFACE_SIGNATURE = candid.signature("() -> (text)")


def compile_definitions(owner: str, text: Any) -> candid.Definitions:
    if type(text) is not str:
        raise CanisterDefinitionError(f"{owner}.CANDID_TYPES must be a str of type definitions")
    try:
        return candid.parse_definitions(text)
    except CandidError as exc:
        raise CanisterDefinitionError(f"{owner}.CANDID_TYPES: {exc}") from None


def compile_signature(owner: str, text: Any, definitions: candid.Definitions) -> candid.Signature:
    if type(text) is not str:
        raise CanisterDefinitionError(f"{owner}: candid= takes the signature text, e.g. '(text) -> (nat)'")
    try:
        return candid.signature(text, definitions)
    except CandidError as exc:
        raise CanisterDefinitionError(f"{owner}: candid signature {text!r}: {exc}") from None


def decode_arguments(signature: candid.Signature, payload: bytes) -> tuple:
    """The method's arguments from a Candid message (``EncodingError`` if it is not one of
    these types: the message says why)."""
    try:
        return tuple(signature.arguments.decode(payload))
    except CandidError as exc:
        raise EncodingError(f"Candid argument {signature.arguments.text}: {exc}") from None


def encode_result(signature: candid.Signature, value: Any) -> tuple[bytes, int]:
    """The reply message of a method's return value, and the work units it took."""
    count = len(signature.results.refs)
    if count == 1:
        values: Any = (value,)
    elif count == 0:
        if value is not None:
            raise EncodingError(f"the method returns () but gave a {type(value).__name__}")
        values = ()
    else:
        values = value
        if type(value) is not tuple or len(value) != count:
            raise EncodingError(f"the method returns {count} values {signature.results.text}: give a tuple of {count}")
    try:
        return signature.results.encode_metered(values)
    except CandidError as exc:
        raise EncodingError(f"Candid result {signature.results.text}: {exc}") from None


def interface_text(cls: type) -> str:
    """The service description of the class's Candid methods (its ``INTERFACE_METHOD``)."""
    return cls.__canister_candid_interface__
