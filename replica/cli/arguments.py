"""Arguments several ``replica`` commands share: canister ids as people type them."""

from __future__ import annotations

import argparse

from replica.ic.errors import PrincipalError
from replica.ic.textual_ids import parse_canister

__all__ = ["canister_argument", "CANISTER_HELP"]

#: How a canister argument is described in ``--help``.
CANISTER_HELP = "its principal (e.g. rwlgt-iiaaa-aaaaa-aaaaa-cai; aaaaa-aa: the management canister) or decimal id"


def canister_argument(text: str) -> int:
    """An argparse ``type``: the canister ``text`` names; argparse prints the refusal's message
    (its own message for a ``ValueError`` would hide which check failed)."""
    try:
        return parse_canister(text)
    except PrincipalError as exc:
        raise argparse.ArgumentTypeError(f"{type(exc).__name__}: {exc}") from None
