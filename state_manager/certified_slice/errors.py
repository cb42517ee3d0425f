"""The errors of certified stream slices: one class per way a slice can fail.

``CertifiedSliceError`` is the root; below it ``SliceEncodeError`` (a slice cannot be served
from this tree and request), ``SliceDecodeError`` (remote bytes that are not a valid slice:
one subclass per check of the decoder, in the order the decoder runs them) and
``SliceEditError`` (a restriction or merge of verified slices that cannot be made).

The signature step runs ``certification.verify_certification`` with this package's classes
(``SIGNATURE_ERRORS``): the check raises the slice error itself, nothing translates.
"""

from __future__ import annotations

from state_manager import certification as cm
from state_manager.errors import StateManagerError

__all__ = [
    "CertifiedSliceError",
    "InvalidDecodeLimits",
    "SliceEncodeError",
    "InvalidSliceRequest",
    "MalformedCertifiedTree",
    "CertificationTreeMismatch",
    "NoStream",
    "IndexOutOfRange",
    "SliceDecodeError",
    "SliceTooLarge",
    "MalformedSlice",
    "NonCanonicalSlice",
    "UnsupportedSliceVersion",
    "SliceFieldCount",
    "SliceTrailingBytes",
    "TreeTooDeep",
    "PayloadNotCanonical",
    "PrunedInPayload",
    "EmptyInPayload",
    "PayloadUnsortedLabels",
    "PayloadDuplicateLabel",
    "PayloadLayoutError",
    "PayloadExceedsWitness",
    "SliceForAnotherSubnet",
    "WitnessNotCanonical",
    "MalformedWitness",
    "WitnessMismatch",
    "PositionSuppliedTwice",
    "PrunedDigestMismatch",
    "WitnessContainsLeaf",
    "WitnessOverBudget",
    "WitnessTooManyNodes",
    "WitnessTooManyPositions",
    "WitnessTooManyPruned",
    "MalformedSliceCertification",
    "RootMismatch",
    "CertificationHeightMismatch",
    "CertificationHeightMissing",
    "UnknownSubnetKey",
    "InvalidSubnetKey",
    "EmptyCertificationSignature",
    "IdentityCertificationSignature",
    "MalformedCertificationSignature",
    "InvalidCertificationSignature",
    "MalformedHeader",
    "InvalidHeaderBounds",
    "InvalidRejectSignals",
    "MalformedMessageIndex",
    "NonConsecutiveMessages",
    "MessageOutsideHeaderRange",
    "MalformedMessage",
    "SliceEditError",
    "InvalidSliceRange",
    "SliceMergeError",
    "DifferentStreams",
    "SlicesNotContiguous",
    "WitnessDoesNotCover",
    "PooledMessageMismatch",
    "SIGNATURE_ERRORS",
]


class CertifiedSliceError(StateManagerError, ValueError):
    """Root of every error raised by this package."""


class InvalidDecodeLimits(CertifiedSliceError):
    """``max_bytes`` / ``max_depth`` given to a decoder are not positive integers."""


# --------------------------------------------------------------------------- encoding side


class SliceEncodeError(CertifiedSliceError):
    """A slice cannot be produced from the given tree and request."""


class InvalidSliceRequest(SliceEncodeError):
    """Request fields of the wrong type, or indices/limits outside ``[0, 2**64)``."""


class MalformedCertifiedTree(SliceEncodeError):
    """The certified tree does not have the ``/streams/<dst>/{header, messages}`` layout."""


class CertificationTreeMismatch(SliceEncodeError):
    """``certification.root != certified_tree.digest()``: the certification is for another state."""


class NoStream(SliceEncodeError):
    """``/streams/<remote>`` is absent from the certified tree."""


class IndexOutOfRange(SliceEncodeError):
    """Not ``header.begin <= witness_begin <= msg_begin <= header.end``."""


# --------------------------------------------------------------------------- decoding side


class SliceDecodeError(CertifiedSliceError):
    """Remote bytes that are not a valid certified stream slice."""


# step 1: bounds and the outer array
class SliceTooLarge(SliceDecodeError):
    """The slice (or one of its trees) exceeds the byte bound."""


class MalformedSlice(SliceDecodeError):
    """Not bytes, not an array, truncated, or a field of the wrong msgpack type."""


class NonCanonicalSlice(SliceDecodeError):
    """The outer array or one of its fields uses a longer msgpack form than the canonical one."""


class UnsupportedSliceVersion(SliceDecodeError):
    """The first field is an integer other than ``1``."""


class SliceFieldCount(SliceDecodeError):
    """A version-1 slice without exactly four fields."""


class SliceTrailingBytes(SliceDecodeError):
    """Bytes follow the outer array."""


class TreeTooDeep(SliceDecodeError):
    """The payload or witness nests deeper than the depth bound."""


# step 2: payload
class PayloadNotCanonical(SliceDecodeError):
    """The payload bytes are not the canonical encoding of one hash tree."""


class PrunedInPayload(SliceDecodeError):
    """The payload contains a ``Pruned`` node: it must carry data, not digests."""


class EmptyInPayload(SliceDecodeError):
    """The payload contains an ``Empty`` node."""


class PayloadUnsortedLabels(SliceDecodeError):
    """Labels of a payload fork group are not increasing."""


class PayloadDuplicateLabel(SliceDecodeError):
    """A label occurs twice in one payload fork group."""


class PayloadLayoutError(SliceDecodeError):
    """The payload is not ``/streams/<one dst>/{header: leaf, messages?: {label: leaf}}``."""


class PayloadExceedsWitness(SliceDecodeError):
    """The payload has more leaf positions or nodes than the witness has bytes to reveal
    (each position takes at least 40 bytes plus its label); refused while parsing."""


class SliceForAnotherSubnet(SliceDecodeError):
    """The payload's ``/streams/<dst>`` is not addressed to this subnet."""


# step 3: witness
class WitnessNotCanonical(SliceDecodeError):
    """The witness bytes are not the canonical encoding of one hash tree."""


class MalformedWitness(SliceDecodeError):
    """A witness fork group has unsorted or duplicate labels, or a leaf that is not alone."""


class WitnessMismatch(SliceDecodeError):
    """A payload position is not revealed in the witness (it proves some other part of the tree)."""


class PositionSuppliedTwice(SliceDecodeError):
    """The witness carries a ``Leaf`` at a position the payload supplies."""


class PrunedDigestMismatch(SliceDecodeError):
    """The witness digest at a payload position is not ``hash_leaf`` of the payload value."""


class WitnessContainsLeaf(SliceDecodeError):
    """The witness carries leaf data; it may only carry digests."""


class WitnessOverBudget(SliceDecodeError):
    """The witness holds more than a slice with this payload can need (``witness_budget``);
    raised at the first node too many, while parsing."""


class WitnessTooManyNodes(WitnessOverBudget):
    """More nodes than ``3·(positions) + 4·R·max_depth``."""


class WitnessTooManyPositions(WitnessOverBudget):
    """More revealed positions than the payload's messages, the header, ``/metadata/height``
    and ``max_extra_positions``."""


class WitnessTooManyPruned(WitnessOverBudget):
    """More pruned nodes outside positions than the siblings of ``2·R`` paths of ``max_depth``."""


# step 4: root
class MalformedSliceCertification(SliceDecodeError):
    """The certification bytes are not a canonical certification."""


class RootMismatch(SliceDecodeError):
    """``reconstruct(witness) != certification.root``."""


class CertificationHeightMismatch(SliceDecodeError):
    """The witness reveals ``/metadata/height`` of the certified tree and it is not the
    certification's height: the height was relabeled (the signature covers only the root)."""


class CertificationHeightMissing(SliceDecodeError):
    """The witness does not reveal ``/metadata/height``: nothing authenticates the height the
    certification claims."""


# step 5: signature
class UnknownSubnetKey(SliceDecodeError):
    """The registry has no public key for the sending subnet at the registry version."""


class InvalidSubnetKey(SliceDecodeError):
    """The registry's public key for the sending subnet is not a valid G2 point."""


class EmptyCertificationSignature(SliceDecodeError):
    """The signature is empty or all zero: the state was never certified."""


class IdentityCertificationSignature(SliceDecodeError):
    """The signature is the identity point of G1."""


class MalformedCertificationSignature(SliceDecodeError):
    """The signature is not a valid point of the prime-order subgroup of G1."""


class InvalidCertificationSignature(SliceDecodeError):
    """A well-formed signature that does not verify under the sending subnet's key for the
    claimed height and root: forged, or its height relabeled."""


# step 6: header
class MalformedHeader(SliceDecodeError):
    """The header leaf is not a canonical stream header."""


class InvalidHeaderBounds(SliceDecodeError):
    """``header.begin > header.end``."""


class InvalidRejectSignals(SliceDecodeError):
    """Reject signals are not strictly increasing or not below ``signals_end``."""


# step 7: messages
class MalformedMessageIndex(SliceDecodeError):
    """A message label is not an 8-byte big-endian index."""


class NonConsecutiveMessages(SliceDecodeError):
    """Message indices skip or repeat."""


class MessageOutsideHeaderRange(SliceDecodeError):
    """A message index is outside ``[header.begin, header.end)``."""


class MalformedMessage(SliceDecodeError):
    """A message leaf is not a canonical message."""


# --------------------------------------------------------------------------- editing side
# Not ``SliceDecodeError``s: these reject a requested edit of slices that already decoded.


class SliceEditError(CertifiedSliceError):
    """A restriction or merge of certified slices that cannot be made."""


class InvalidSliceRange(SliceEditError):
    """``restrict_certified_slice`` asked for messages the slice does not carry."""


class SliceMergeError(SliceEditError):
    """``append_certified_slice`` got two slices that do not continue each other."""


class DifferentStreams(SliceMergeError):
    """The two slices are of different ``/streams/<dst>``."""


class SlicesNotContiguous(SliceMergeError):
    """The newer slice's messages do not begin exactly at the pooled messages' end."""


class WitnessDoesNotCover(SliceMergeError):
    """The newer witness does not reveal a position of the pooled messages."""


class PooledMessageMismatch(SliceMergeError):
    """The newer witness's digest at a pooled position is not ``hash_leaf`` of the pooled message."""


#: What step 5 raises for each way ``verify_certification`` fails.
SIGNATURE_ERRORS = cm.SignatureErrors(
    invalid_key=InvalidSubnetKey,
    empty=EmptyCertificationSignature,
    identity=IdentityCertificationSignature,
    malformed=MalformedCertificationSignature,
    invalid=InvalidCertificationSignature,
)
