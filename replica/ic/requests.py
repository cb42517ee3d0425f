"""The content maps of requests: call, query and read_state, their fields checked.

The interface specification, *Request: Call*, *Request: Query call*, *Request: Read state* and
*Authentication*. Every request carries ``request_type``, ``sender`` (a principal),
``ingress_expiry`` (ns since 1970; a u64, as the IC stores it) and optionally ``nonce`` (at most
32 bytes). A call or query adds ``canister_id``, ``method_name`` (text) and ``arg`` (a blob);
a read_state adds ``paths``: at most 1000 paths of at most 127 labels (blobs) each. A call or
query may also carry ``sender_info`` (``{info, sig}``, blobs) as the specification's CDDL allows.

No other field is accepted: the IC derives a request's id from the fields it knows, so a map
with any other field could not be signed for and is refused (``MalformedContent``) rather
than given an id nobody signed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from .errors import MalformedContent
from .principal import MAX_PRINCIPAL_BYTES, Principal

__all__ = [
    "MAX_NONCE_BYTES", "MAX_PATHS", "MAX_PATH_LABELS", "CallContent", "ReadStateContent", "RequestContent",
    "parse_content",
]

MAX_NONCE_BYTES = 32
MAX_PATHS = 1000
MAX_PATH_LABELS = 127
_U64_LIMIT = 1 << 64
_COMMON = {"request_type", "sender", "ingress_expiry"}
_CALL_FIELDS = _COMMON | {"canister_id", "method_name", "arg"}
_READ_STATE_FIELDS = _COMMON | {"paths"}
_OPTIONAL = {"call": {"nonce", "sender_info"}, "query": {"nonce", "sender_info"}, "read_state": {"nonce"}}


@dataclass(frozen=True, slots=True)
class CallContent:
    """A call (``request_type`` ``"call"``) or query (``"query"``) to ``canister_id``."""

    request_type: str
    sender: Principal
    ingress_expiry: int
    canister_id: Principal
    method_name: str
    arg: bytes
    nonce: bytes | None = None


@dataclass(frozen=True, slots=True)
class ReadStateContent:
    """A read of ``paths`` of the state tree."""

    sender: Principal
    ingress_expiry: int
    paths: tuple[tuple[bytes, ...], ...]
    nonce: bytes | None = None
    request_type: str = "read_state"


RequestContent = Union[CallContent, ReadStateContent]


def _principal(value: object, field: str) -> Principal:
    if type(value) is not bytes or len(value) > MAX_PRINCIPAL_BYTES:
        raise MalformedContent(f"{field} is a principal: a blob of at most {MAX_PRINCIPAL_BYTES} bytes")
    return Principal(value)


def _paths(value: object) -> tuple[tuple[bytes, ...], ...]:
    if type(value) is not list or len(value) > MAX_PATHS:
        raise MalformedContent(f"paths is an array of at most {MAX_PATHS} paths")
    paths = []
    for path in value:
        if type(path) is not list or len(path) > MAX_PATH_LABELS or any(type(label) is not bytes for label in path):
            raise MalformedContent(f"a path is an array of at most {MAX_PATH_LABELS} blob labels")
        paths.append(tuple(path))
    return tuple(paths)


def _check_sender_info(value: object) -> None:
    if type(value) is not dict or set(value) != {"info", "sig"} or any(type(v) is not bytes for v in value.values()):
        raise MalformedContent("sender_info is {info, sig}, both blobs")


def parse_content(content: Mapping[str, Any]) -> RequestContent:
    """The typed content of a request's ``content`` map (module docstring), or ``MalformedContent``."""
    if type(content) is not dict:
        raise MalformedContent("a request's content is a map")
    request_type = content.get("request_type")
    if type(request_type) is not str or request_type not in _OPTIONAL:
        raise MalformedContent(f"request_type must be call, query or read_state, not {request_type!r}")
    required = _READ_STATE_FIELDS if request_type == "read_state" else _CALL_FIELDS
    missing, unknown = required - content.keys(), content.keys() - required - _OPTIONAL[request_type]
    if missing or unknown:
        raise MalformedContent(f"a {request_type} content lacks {sorted(missing)} or has unknown {sorted(unknown)}")
    sender = _principal(content["sender"], "sender")
    expiry = content["ingress_expiry"]
    if type(expiry) is not int or not 0 <= expiry < _U64_LIMIT:
        raise MalformedContent("ingress_expiry is a u64 of nanoseconds since 1970")
    nonce = content.get("nonce")
    if nonce is not None and (type(nonce) is not bytes or len(nonce) > MAX_NONCE_BYTES):
        raise MalformedContent(f"nonce is a blob of at most {MAX_NONCE_BYTES} bytes")
    if request_type == "read_state":
        return ReadStateContent(sender, expiry, _paths(content["paths"]), nonce)
    if "sender_info" in content:
        _check_sender_info(content["sender_info"])
    method_name, arg = content["method_name"], content["arg"]
    if type(method_name) is not str:
        raise MalformedContent("method_name is text")
    if type(arg) is not bytes:
        raise MalformedContent("arg is a blob")
    return CallContent(request_type, sender, expiry, _principal(content["canister_id"], "canister_id"),
                       method_name, arg, nonce)
