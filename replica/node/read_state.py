"""What ``read_state`` may reveal, and the IC certificate it answers with (pure).

The interface specification, *Request: Read state*, guards the paths a read_state may ask for.
A request to canister ``c`` (``/api/v*/canister/<c>/read_state``) may ask for::

    /time
    /canister/<c>/module_hash | /controllers | /certified_data     c: the URL's canister only
    /request_status/<request id>[/status | /reply | /reject_code | /reject_message | /error_code]
    /subnet[/<subnet id>[/public_key | /canister_ranges | /node[/<node id>[/public_key]]]]
    /canister_ranges/<subnet id>[/…]

and a request to a subnet (``/api/v*/subnet/<s>/read_state``) for ``/time``, ``/subnet/…`` and
``/canister_ranges/…``. A request status is readable only by the request's sender
(``RequestStatusForbidden``, 403): another principal learns nothing of it, not even that it
exists. Unlike the IC, one read may ask for the statuses of several requests (an agent polling
its own calls in one certificate), each of them the reader's; and a testnet's operator (an
identity derived from its seed, ``TestnetDirectory.operator``) may read every status, for
``replica trace`` and the status page.

Two paths are the replica's own: ``/metadata/height`` (always revealed: it authenticates the
height of the certification, whose signature covers the root only; docs/architecture.md,
*Certifications*) and ``/streams/<subnet>/header | messages[/<index>]`` (certified state like
the rest; ``replica testnet status`` and ``replica trace`` read them).

The answer is the certificate ``{tree: witness(certified tree, paths ∪ {/time, /metadata/height}),
signature, delegation?}``: the subnet's certification is the IC's BLS signature on the root, so
it is the certificate's signature as it is.
"""

from __future__ import annotations

from typing import Callable, Sequence

from state_manager.certification import HEIGHT_PATH, Certification
from state_manager.labeled_trie import LabeledTrie
from state_manager.trie_witness import plan_paths, witness_tree

from replica.client.refusals import PathNotAllowed, RequestStatusForbidden
from replica.ic.certificate import Certificate, CertificateDelegation, encode_certificate
from replica.ic.principal import canister_principal

__all__ = ["REQUEST_ID_BYTES", "check_canister_paths", "check_subnet_paths", "certificate_for"]

REQUEST_ID_BYTES = 32
_REQUEST_STATUS_FIELDS = (b"status", b"reply", b"reject_code", b"reject_message", b"error_code")
_CANISTER_FIELDS = (b"module_hash", b"controllers", b"certified_data")
_SUBNET_FIELDS = (b"public_key", b"canister_ranges", b"node")


def _describe(path: Sequence[bytes]) -> str:
    return "/" + "/".join(label.decode("latin-1") if label.isascii() and label.isalpha() else label.hex()
                          for label in path)


def _subnet_path(head: bytes, rest: tuple[bytes, ...]) -> bool:
    if head == b"subnet":
        return (len(rest) <= 1 or (rest[1] in _SUBNET_FIELDS and (len(rest) == 2 or (
            rest[1] == b"node" and (len(rest) == 3 or (len(rest) == 4 and rest[3] == b"public_key"))))))
    return head == b"canister_ranges"


def _ours(head: bytes, rest: tuple[bytes, ...]) -> bool:
    return ((head == b"metadata" and rest == (b"height",))
            or (head == b"streams" and len(rest) == 2 and rest[1] in (b"header", b"messages"))
            or (head == b"streams" and len(rest) == 3 and rest[1] == b"messages" and len(rest[2]) == 8))


def check_subnet_paths(paths: Sequence[Sequence[bytes]]) -> None:
    """Raise ``PathNotAllowed`` unless every path is one a subnet read_state may ask for."""
    for path in paths:
        head, rest = path[0], tuple(path[1:])
        if not ((head == b"time" and not rest) or _subnet_path(head, rest) or _ours(head, rest)):
            raise PathNotAllowed(f"a subnet's read_state may not ask for {_describe(path)}")


def check_canister_paths(paths: Sequence[Sequence[bytes]], canister_id: int, reader: bytes,
                         sender_of: Callable[[bytes], bytes | None], operators: frozenset[bytes] = frozenset()) -> None:
    """Raise ``PathNotAllowed`` unless every path is one of the module docstring's for
    ``canister_id``, and ``RequestStatusForbidden`` for a request status of a request that
    ``reader`` did not send (``sender_of(request id)``: its sender, None if unknown) unless the
    reader is one of the testnet's ``operators``."""
    own = canister_principal(canister_id).raw
    for path in paths:
        head, rest = path[0], tuple(path[1:])
        if head == b"request_status" and 1 <= len(rest) <= 2 and len(rest[0]) == REQUEST_ID_BYTES and (
                len(rest) == 1 or rest[1] in _REQUEST_STATUS_FIELDS):
            sender = None if reader in operators else sender_of(rest[0])
            if sender is not None and sender != reader:
                raise RequestStatusForbidden(f"request {rest[0].hex()} was not sent by the reader")
            continue
        allowed = ((head == b"time" and not rest)
                   or (head == b"canister" and len(rest) == 2 and rest[0] == own and rest[1] in _CANISTER_FIELDS)
                   or _subnet_path(head, rest) or _ours(head, rest))
        if not allowed:
            raise PathNotAllowed(f"read_state of canister {canister_id} may not ask for {_describe(path)}")


def certificate_for(certified: LabeledTrie, certification: Certification, paths: Sequence[Sequence[bytes]],
                    delegation: CertificateDelegation | None) -> bytes:
    """The encoded certificate of ``paths``, ``/time`` and ``/metadata/height``."""
    plan = plan_paths([list(path) for path in paths] + [[b"time"], list(HEIGHT_PATH)])
    return encode_certificate(Certificate(witness_tree(certified, plan), certification.signature, delegation))
