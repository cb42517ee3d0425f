"""Canister and subnet ids as people read and type them: the IC's textual principals.

Inside the replica a canister is a u64 (state, files, the Python API); every display goes
through ``canister_text`` and everything a person types through ``parse_canister``. Canister
``n`` is the principal ``n`` (8 bytes big-endian) · ``0x01 0x01`` in its textual form, so canister
0 is ``rwlgt-iiaaa-aaaaa-aaaaa-cai``. The management canister is kept internally as
``MANAGEMENT_CANISTER_ID`` (2**64 - 1) but is the empty principal on the IC, ``aaaaa-aa``: it is
shown as that, and the text of the principal of 2**64 - 1 is refused so that one canister never
has two names. ``parse_canister`` also takes a decimal id (the command line always has), and
refuses with ``replica.ic.errors``' principal classes, each message saying what was wrong.

Subnets keep their names (``subnet-0``) as their ids inside a testnet; ``subnet_text`` is the
IC principal shown beside the name where a subnet is described in full: the self-authenticating
id of the DER of its threshold public key (``replica.ic.principal.subnet_principal``).
"""

from __future__ import annotations

from state_manager.messages import MANAGEMENT_CANISTER_ID

from .errors import NotACanisterPrincipal, PrincipalTextMalformed
from .bls import public_key_to_der
from .principal import Principal, canister_number, canister_principal, principal_from_text, subnet_principal

__all__ = ["MANAGEMENT_CANISTER_TEXT", "canister_text", "parse_canister", "subnet_text"]

MANAGEMENT_CANISTER_TEXT = "aaaaa-aa"
_U64 = 1 << 64
_EXAMPLE = canister_principal(0).to_text()


def canister_text(canister_id: int) -> str:
    """The textual principal of canister ``canister_id`` (``aaaaa-aa`` for the management canister)."""
    if type(canister_id) is not int or not 0 <= canister_id < _U64:
        raise NotACanisterPrincipal(f"a canister id is a u64, not {canister_id!r}")
    if canister_id == MANAGEMENT_CANISTER_ID:
        return MANAGEMENT_CANISTER_TEXT
    return canister_principal(canister_id).to_text()


def parse_canister(value: str | int) -> int:
    """The u64 a canister id names: its textual principal (any case), a decimal number, or an int."""
    if type(value) is int:
        if not 0 <= value < _U64:
            raise NotACanisterPrincipal(f"canister id {value} is not a u64 (0 to 2**64 - 1)")
        return value
    if not isinstance(value, str):
        raise NotACanisterPrincipal(f"a canister id is a principal's text or an int, not {type(value).__name__}")
    text = value.strip()
    if text.isascii() and text.isdigit():
        return parse_canister(int(text))
    if text[:1] in "+-" and text[1:].isascii() and text[1:].isdigit():
        raise NotACanisterPrincipal(f"canister id {value!r} is not a u64 (0 to 2**64 - 1)")
    if not text or "-" not in text:
        raise PrincipalTextMalformed(f"{value!r} is not a canister id: give its principal (like {_EXAMPLE}) "
                                     f"or a decimal number")
    raw = principal_from_text(text)   # refuses length, characters, checksum and grouping
    if raw == b"":
        return MANAGEMENT_CANISTER_ID
    number = canister_number(Principal(raw))
    if number == MANAGEMENT_CANISTER_ID:
        raise NotACanisterPrincipal(f"{value!r} names canister 2**64 - 1, which this replica reserves for the "
                                    f"management canister; that one is {MANAGEMENT_CANISTER_TEXT}")
    return number


def subnet_text(threshold_public_key: bytes) -> str:
    """The textual principal of the subnet whose threshold public key (96 bytes) is given."""
    return subnet_principal(public_key_to_der(threshold_public_key)).to_text()
