"""What ``read_state`` may reveal, and the certificate it answers with (pure).

A request for canister ``c`` may ask for these paths of the certified tree, nothing else
(``PathNotAllowed``)::

    /time
    /metadata/height
    /request_status/<message id (32 bytes)>[/status | /reply | /reject_code | /reject_message]
    /canister/<c's principal>/module_hash | /certified_data | /controllers
    /subnet/<subnet principal>/public_key | /canister_ranges
    /canister_ranges/<subnet principal>[/<shard label>]
    /streams/<subnet id>/header
    /streams/<subnet id>/messages[/<index as 8-byte BE>]

Streams are certified state like the rest: ``replica testnet status`` and ``replica trace``
read them here (a whole ``messages`` subtree is bounded by the stream limits, 10 MiB by default).

The answer is ``witness(certified tree, paths ∪ {/time, /metadata/height})`` — the tree with
everything else pruned, so ``reconstruct(witness) == certified root`` — and the certification
of that root. ``/time`` and ``/metadata/height`` are always revealed: the agent checks ``/time``
for freshness, and ``/metadata/height`` authenticates the height the certification claims (its
signature covers the root only; docs/architecture.md, *Certifications*).
"""

from __future__ import annotations

from typing import Sequence

from state_manager.certification import HEIGHT_PATH, Certification
from state_manager.labeled_trie import LabeledTrie
from state_manager.state_tree import canister_label
from state_manager.trie_witness import plan_paths, witness_tree

from replica.client.http_wire import encode_certificate
from replica.client.refusals import PathNotAllowed

__all__ = ["MESSAGE_ID_BYTES", "check_path", "certificate_for"]

MESSAGE_ID_BYTES = 32
_REQUEST_STATUS_FIELDS = (b"status", b"reply", b"reject_code", b"reject_message")


def _describe(path: Sequence[bytes]) -> str:
    return "/" + "/".join(label.decode("latin-1") if label.isascii() and label.isalpha() else label.hex()
                          for label in path)


def check_path(path: Sequence[bytes], canister_id: int) -> None:
    """Raise ``PathNotAllowed`` unless ``path`` is one of the module docstring's paths."""
    head, rest = path[0], tuple(path[1:])
    allowed = (
        (head == b"time" and not rest)
        or (head == b"metadata" and rest == (b"height",))
        or (head == b"request_status" and 1 <= len(rest) <= 2 and len(rest[0]) == MESSAGE_ID_BYTES
            and (len(rest) == 1 or rest[1] in _REQUEST_STATUS_FIELDS))
        or (head == b"canister" and len(rest) == 2 and rest[0] == canister_label(canister_id)
            and rest[1] in (b"module_hash", b"certified_data", b"controllers"))
        or (head == b"subnet" and len(rest) == 2 and rest[1] in (b"public_key", b"canister_ranges"))
        or (head == b"canister_ranges" and 1 <= len(rest) <= 2)
        or (head == b"streams" and len(rest) == 2 and rest[1] in (b"header", b"messages"))
        or (head == b"streams" and len(rest) == 3 and rest[1] == b"messages" and len(rest[2]) == 8)
    )
    if not allowed:
        raise PathNotAllowed(f"read_state of canister {canister_id} may not ask for {_describe(path)}")


def certificate_for(certified: LabeledTrie, certification: Certification, paths: Sequence[Sequence[bytes]]) -> bytes:
    """The encoded read_state answer: the witness of ``paths``, ``/time`` and ``/metadata/height``,
    and ``certification``."""
    plan = plan_paths([list(path) for path in paths] + [[b"time"], list(HEIGHT_PATH)])
    return encode_certificate(witness_tree(certified, plan), certification)
