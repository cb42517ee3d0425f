"""The table of golden vectors: every versioned canonical encoding of the product.

A ``Vector`` names one fixed value (``fixtures``), how to encode it, how to decode the
result, and which version constant governs its bytes. The committed bytes live in
``vectors.json``, keyed by ``(name, version)``; ``test_golden`` compares against them and
``python -m tests.golden.record`` prints (or merges) the current ones.

Versions: ``version_constant`` is the dotted path of the public constant the encoder writes;
``version_of`` reads the version back out of encoded bytes. Where the constant is private
(node secrets, subnet recordings, audit child protocol) only ``version_of`` is known: the
current version is then the one the encoder writes. A few vectors are *unversioned*
derivations (hash-tree digests, module hashes, state roots): any change to them changes
every hash that depends on them, so they are pinned and re-recorded on purpose only.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

from consensus_stub import block as block_module
from consensus_stub.agreement.messages import decode_message, encode_message
from consensus_stub.block_store import BlockLog
from consensus_stub.genesis import decode_node_secrets, encode_node_secrets
from consensus_stub.registry import decode_registry, encode_registry
from message_routing.batch import decode_batch, encode_batch
from replica.audit.build import build_from_value, build_to_value
from replica.audit.isolation import decode_answer, decode_request, encode_answer, encode_request
from replica.audit.report import build_report, comparable
from replica.audit.live_feed import FeedContext, decode_chunk, decode_context, encode_chunk, encode_context
from replica.audit.run_log import decode_run_log, encode_run_log, load_run_log, write_run_log
from replica.client.answers import decode_dry_run_answer, encode_dry_run_answer
from replica.ic.certificate import Certificate, decode_certificate, encode_certificate
from replica.ic.http_interface import CallAnswer, decode_call_answer, decode_read_state_answer, encode_call_answer
from replica.ic.http_interface import encode_read_state_answer
from replica.ic.query_response import QueryReplied, QueryResponse, decode_query_response, encode_query_response
from replica.ic.query_response import sign_query_response
from replica.client.envelope import QUERY, decode_signed_ingress, sign_ingress
from replica.ic.request_id import request_id
from replica.execution import module_hash
from replica.ic import cbor as ic_cbor
from replica.ic.canister_ranges import decode_canister_ranges, encode_canister_ranges
from replica.ic.request_id import decode_uleb128, uleb128
from replica.node import state_sync as sync
from replica.execution.dry_run import DryRunResult, OutgoingCall
from replica.node.node_store import AgreementLog, ExecutedLog, ProofFile
from replica.testnet.recording import decode_recording, encode_recording
from state_manager import certification as cm
from state_manager import certified_slice as cs
from state_manager import encoding
from state_manager import hash_tree as ht
from state_manager.bls import PUBLIC_KEY_DER_PREFIX
from state_manager.canister_snapshot import decode_canister_snapshot, encode_canister_snapshot
from state_manager.codec import (
    call_context_from_value, call_context_leaf_value, call_context_to_value, callback_from_value,
    callback_leaf_value, callback_to_value, decode_header_leaf,
    decode_message_leaf, encode_header_leaf, encode_message_leaf, ingress_from_value, ingress_status_from_value,
    ingress_status_to_value, ingress_to_value,
)
from state_manager.encoding import encode as leaf_bytes
from state_manager.hash_tree import Empty
from state_manager.labeled_trie import LabeledTrie
from state_manager.messages import MANAGEMENT_CANISTER_ID
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_tree import build_state_trees, leaf
from state_manager.store import Checkpoint, CheckpointStore, encode_manifest
from state_manager.tree_encoding import decode_tree, encode_tree
from xnet.grpc import messages as wire

from . import fixtures as fx

GOLDEN_FILE = Path(__file__).with_name("vectors.json")
RECORD_COMMAND = "python -m tests.golden.record --write"


@dataclass(frozen=True)
class Vector:
    name: str
    build: Callable[[], Any]
    encode: Callable[[Any], bytes]
    #: Dotted path of the version constant the encoder writes (``None``: private or none).
    version_constant: Optional[str] = None
    #: Reads the version written in encoded bytes (``None``: the bytes carry none).
    version_of: Optional[Callable[[bytes], int]] = None
    decode: Optional[Callable[[bytes], Any]] = None
    #: ``expect(decoded, built)``: the decoded golden bytes are the fixed value.
    expect: Callable[[Any, Any], bool] = lambda decoded, built: decoded == built
    #: Encodes a decoded value again (``None``: the decoder's output is not the encoder's input).
    reencode: Optional[Callable[[Any], bytes]] = "encode"  # type: ignore[assignment]
    #: For unversioned vectors: what depends on it, for the failure message.
    unversioned_note: str = ""
    #: Where a private version constant lives (named in failure messages only, never imported).
    private_version: str = ""

    def current_version(self) -> Optional[int]:
        """The version the encoder writes today: its public constant, else what its bytes say."""
        if self.version_constant is not None:
            module, _, attribute = self.version_constant.rpartition(".")
            return getattr(importlib.import_module(module), attribute)
        if self.version_of is not None:
            return self.version_of(self.encode(self.build()))
        return None

    def version_name(self) -> str:
        """The constant a developer bumps when this encoding changes."""
        return self.version_constant or self.private_version or "its VERSION"

    def reencoder(self) -> Optional[Callable[[Any], bytes]]:
        return self.encode if self.reencode == "encode" else self.reencode


# -- helpers -----------------------------------------------------------------------------------

def _msgpack_field(position: int) -> Callable[[bytes], int]:
    """The version at ``position`` of a canonical msgpack array."""
    return lambda data: encoding.decode(data, max_bytes=max(len(data), 1))[position]


def _label(label: bytes) -> str:
    text = label.decode("ascii", "replace")
    return text if label.isascii() and text.isprintable() and "/" not in text else "0x" + label.hex()


def tree_leaves(trie: LabeledTrie, prefix: str = "") -> dict[str, bytes]:
    """``{path: leaf bytes}`` of every leaf under ``trie`` (binary labels as ``0x…``)."""
    out: dict[str, bytes] = {}
    for label, value in trie.items():
        path = f"{prefix}/{_label(label)}"
        if isinstance(value, LabeledTrie):
            out.update(tree_leaves(value, path))
        elif isinstance(value, bytes):
            out[path] = value
        elif not isinstance(value, Empty):
            raise TypeError(f"{path}: a trie value of unexpected type {type(value).__name__}")
    return out


def _generic_leaf(data: bytes) -> Any:
    version, value = encoding.decode(data)
    return value


def _leaf_codec(path: str) -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]]:
    """The typed decoder of the leaf at ``path`` and the encoder it inverts."""
    parts = path.split("/")
    if parts[-2] == "messages":   # streams, loopback, canister input/output queues
        return decode_message_leaf, encode_message_leaf
    if parts[-1] == "header":
        return decode_header_leaf, encode_header_leaf
    if parts[1] == "ingress_history":
        return (lambda d: ingress_status_from_value(_generic_leaf(d))), (lambda s: leaf(ingress_status_to_value(s)))
    if parts[-2] == "ingress" and "queues" in parts:
        return (lambda d: ingress_from_value(_generic_leaf(d))), (lambda i: leaf(ingress_to_value(i)))
    if parts[-2] == "call_contexts":
        return (lambda d: call_context_from_value(_generic_leaf(d))), (lambda c: leaf(call_context_to_value(c)))
    if parts[-2] == "callbacks":
        return (lambda d: callback_from_value(_generic_leaf(d))), (lambda c: leaf(callback_to_value(c)))
    return _generic_leaf, leaf


#: Top labels of the certified tree whose leaves are the IC's encodings (``state_manager.state_tree``).
_IC_PATHS = {"time", "request_status", "canister", "subnet", "canister_ranges"}


def _is_ic_leaf(path: str) -> bool:
    parts = path.split("/")
    return parts[1] == "certified" and parts[2] in _IC_PATHS


def _der_key(data: bytes) -> bytes:
    """The raw key behind ``PUBLIC_KEY_DER_PREFIX`` (the fixture's keys are opaque 48-byte
    values of the former variant, so they are not parsed as points here)."""
    if not data.startswith(PUBLIC_KEY_DER_PREFIX):
        raise ValueError("not a DER-encoded IC BLS key")
    return data[len(PUBLIC_KEY_DER_PREFIX):]


def _ic_leaf_codec(path: str) -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]]:
    """The IC's decoder of the leaf at ``path`` (``replica.ic``'s where it has one) and the
    encoder it inverts."""
    parts = path.split("/")
    last = parts[-1]
    if last in ("time", "reject_code"):
        return decode_uleb128, uleb128
    if last in ("status", "reject_message"):
        return (lambda d: d.decode("utf-8")), (lambda text: text.encode("utf-8"))
    if last == "controllers":
        return (lambda d: ic_cbor.decode(d, max_bytes=1 << 10)), ic_cbor.encode
    if last == "canister_ranges" or parts[2] == "canister_ranges":
        return decode_canister_ranges, encode_canister_ranges
    if last == "public_key":
        return _der_key, (lambda raw: PUBLIC_KEY_DER_PREFIX + raw)
    return (lambda d: d), (lambda d: d)   # reply, certified_data, module_hash: the blob itself


def _leaf_vector(path: str, trees: Callable[[], Any] = fx.trees) -> Vector:
    if _is_ic_leaf(path):
        decode, reencode = _ic_leaf_codec(path)
        return Vector(
            name=f"state tree leaf {path}", build=lambda: tree_leaves(trees().full)[path], encode=lambda data: data,
            decode=decode, expect=lambda decoded, built: True, reencode=reencode,
            unversioned_note="what IC agents read at this path: the interface specification's encoding")
    decode, reencode = _leaf_codec(path)
    return Vector(
        name=f"state tree leaf {path}", build=lambda: tree_leaves(trees().full)[path], encode=lambda data: data,
        version_constant="state_manager.codec.LEAF_VERSION", version_of=_msgpack_field(0), decode=decode,
        expect=lambda decoded, built: True, reencode=reencode)


def _in_scratch(action: Callable[[Path], Any]) -> Any:
    with fx.scratch_dir() as directory:
        return action(Path(directory))


def _write_block_log(blocks, directory: Path) -> Path:
    path = directory / "blocks.log"
    log, existing = BlockLog.open(path)
    assert existing == []
    for b in blocks:
        log.append(b)
    log.close()
    return path


def _encode_block_log(blocks) -> bytes:
    return _in_scratch(lambda d: _write_block_log(blocks, d).read_bytes())


def _encode_finalized_mark(blocks) -> bytes:
    return _in_scratch(lambda d: _write_block_log(blocks, d).with_name("blocks.log.finalized").read_bytes())


def _decode_block_log(data: bytes, mark: Optional[bytes] = None):
    def run(directory: Path):
        path = directory / "blocks.log"
        path.write_bytes(data)
        if mark is not None:
            path.with_name("blocks.log.finalized").write_bytes(mark)
        log, blocks = BlockLog.open(path)
        log.close()
        return blocks
    return _in_scratch(run)


def _checkpoint_dir(directory: Path) -> Path:
    return directory / f"{fx.HEIGHT:020d}"


def _checkpoint_state_bytes() -> bytes:
    """The ``state.bin`` of the manifest vector: the fixture state in state encoding version 1,
    as committed. The manifest embeds the digest of ``state.bin``; pinning those bytes keeps the
    manifest vector about the manifest's own format, not about the state encoding's version."""
    return bytes.fromhex(next(e["hex"] for e in load_golden() if (e["name"], e["version"]) == ("state encoding", 1)))


def _encode_checkpoint_manifest(checkpoint) -> bytes:
    def run(directory: Path) -> bytes:
        # What CheckpointStore.write writes, over the pinned state.bin bytes (and it does write that).
        CheckpointStore(directory).write(checkpoint.height, checkpoint.state, checkpoint.full_hash)
        written = _checkpoint_dir(directory) / "manifest.bin"
        state_bin = (_checkpoint_dir(directory) / "state.bin").read_bytes()
        if written.read_bytes() != encode_manifest(checkpoint.height, checkpoint.full_hash, state_bin):
            raise AssertionError("CheckpointStore.write does not write encode_manifest")
        return encode_manifest(checkpoint.height, checkpoint.full_hash, _checkpoint_state_bytes())
    return _in_scratch(run)


def _decode_checkpoint_manifest(manifest: bytes):
    def run(directory: Path):
        target = _checkpoint_dir(directory)
        target.mkdir()
        (target / "manifest.bin").write_bytes(manifest)
        (target / "state.bin").write_bytes(_checkpoint_state_bytes())
        return CheckpointStore(directory).load(fx.HEIGHT)
    return _in_scratch(run)


def _checkpoint() -> Checkpoint:
    return Checkpoint(fx.HEIGHT, fx.trees().full_hash, fx.state())


def _encode_run_dir_manifest(log) -> bytes:
    return _in_scratch(lambda d: (write_run_log(log, d) / "manifest.bin").read_bytes())


def _decode_run_dir_manifest(manifest: bytes):
    def run(directory: Path):
        write_run_log(fx.run_log(), directory)
        (directory / "manifest.bin").write_bytes(manifest)
        return load_run_log(directory)
    return _in_scratch(run)


def _slice_bytes(_: Any = None) -> bytes:
    return cs.encode_certified_stream_slice(fx.trees().certified, fx.certification(), **fx.SLICE_REQUEST)


def _decode_slice(data: bytes) -> cs.CertifiedSlice:
    return cs.decode_certified_stream_slice(fx.B, fx.A, fx.public_key_for, fx.REGISTRY_VERSION, data)


def _expected_slice() -> cs.CertifiedSlice:
    return cs.CertifiedSlice(fx.SLICE_STREAM, fx.certification(), witness_begin=3, witness_end=6)


def _live_context() -> FeedContext:
    log = fx.run_log()
    return FeedContext(log.subnet_ids(), log.canister_modules, log.limits_name, log.limits, log.checkpoint_interval,
                       log.topologies, None)


def _encode_subnet_file(log) -> bytes:
    return _in_scratch(lambda d: sorted(write_run_log(log, d).glob("subnet-*.bin"))[0].read_bytes())


def _decode_subnet_file(data: bytes):
    def run(directory: Path):
        write_run_log(fx.run_log(), directory)
        sorted(directory.glob("subnet-*.bin"))[0].write_bytes(data)
        return load_run_log(directory).subnets[0]
    return _in_scratch(run)


# -- a node's records, state sync --------------------------------------------------------------

def _magic_version(start: int) -> Callable[[bytes], int]:
    """The version a record file's 8-byte magic ends in (``agrlog01``: 1, ``execlog1``: 1)."""
    return lambda data: int(data[start:8])


def _written(name: str, write: Callable[[Path], Any]) -> Callable[[Any], bytes]:
    """Encoder: what ``write(path)`` leaves in a fresh file ``name``."""
    def encode(value: Any) -> bytes:
        def run(directory: Path) -> bytes:
            write(directory / name, value)
            return (directory / name).read_bytes()
        return _in_scratch(run)
    return encode


def _read(read: Callable[[Path], Any]) -> Callable[[bytes], Any]:
    """Decoder: what ``read(path)`` makes of a file holding the bytes."""
    def decode(data: bytes) -> Any:
        def run(directory: Path) -> Any:
            path = directory / "records"
            path.write_bytes(data)
            return read(path)
        return _in_scratch(run)
    return decode


def _write_agreement_log(path: Path, messages) -> None:
    log = AgreementLog(path)
    for message in messages:
        log.append(message)
    log.close()


def _read_agreement_log(path: Path):
    log = AgreementLog(path)
    log.close()
    return log.artifacts


def _write_executed_log(path: Path, entries) -> None:
    log = ExecutedLog(path)
    for entry in entries:
        log.record(*entry)
    log.close()


def _read_executed_log(path: Path):
    log = ExecutedLog(path)
    log.close()
    return log.entries


def _offer() -> sync.CheckpointOffer:
    """Subnet A's checkpoint of height 5 as offered to a peer: the pinned ``state.bin`` (the
    fixture state, certified by the fixture certification), so the vector is about the offer."""
    return sync.CheckpointOffer(fx.HEIGHT, fx.digest("finalized block"), _checkpoint_state_bytes(), fx.certification())


def _decode_envelope(data: bytes):
    """A call envelope's ``Ingress``, at the fixtures' time."""
    return decode_signed_ingress(data, 1 << 16, now_ns=fx.TIME)


def _json_version(data: bytes) -> int:
    return json.loads(data)["version"]


def _report_bytes(facts) -> bytes:
    return (json.dumps(comparable(build_report(facts, {})), indent=2, sort_keys=True) + "\n").encode()


# -- the table ---------------------------------------------------------------------------------

LEAF = "state_manager.codec.LEAF_VERSION"
BOUNDED_LEAF = "state_manager.codec.BOUNDED_WAIT_LEAF_VERSION"
CERT = "state_manager.certification.CERTIFICATION_VERSION"
SHARE = "state_manager.certification.CERTIFICATION_SHARE_VERSION"
SLICE = "state_manager.certified_slice.SLICE_VERSION"
BLOCK = "consensus_stub.block.BLOCK_VERSION"
WIRE = "xnet.grpc.messages.WIRE_VERSION"
ENVELOPE = "replica.client.envelope.ENVELOPE_VERSION"
MESSAGE = "consensus_stub.agreement.messages.MESSAGE_VERSION"
SNAPSHOT = "state_manager.canister_snapshot.SNAPSHOT_VERSION"
HTTP_NOTE = ("the IC HTTP interface's bodies (replica.ic.http_interface, replica.client.answers), which every "
             "agent reads: they carry no version; they are the interface specification's")
TREE_NOTE = ("the hash-tree encoding has no version of its own: it is carried inside certified slices "
             "(bump state_manager.certified_slice.SLICE_VERSION)")


def _static_vectors() -> list[Vector]:
    v0, v1 = _msgpack_field(0), _msgpack_field(1)
    slice_wire = (fx.B, 3, 4, 10, 1 << 20)
    return [
        # state_manager.codec: the stream leaves (the other leaves are pinned per path below).
        Vector("stream message leaf (request)", lambda: fx.REQUEST, encode_message_leaf, LEAF, v0, decode_message_leaf),
        Vector("stream message leaf (reply)", lambda: fx.REPLY, encode_message_leaf, LEAF, v0, decode_message_leaf),
        Vector("stream message leaf (reject)", lambda: fx.REJECT, encode_message_leaf, LEAF, v0, decode_message_leaf),
        Vector("stream header leaf", lambda: fx.HEADER, encode_header_leaf, LEAF, v0, decode_header_leaf),
        # bounded-wait calls (issue 17): values with a deadline, leaf version 2
        Vector("stream message leaf (bounded-wait request)", lambda: fx.BOUNDED_REQUEST, encode_message_leaf,
               BOUNDED_LEAF, v0, decode_message_leaf),
        Vector("stream message leaf (bounded-wait reply)", lambda: fx.BOUNDED_REPLY, encode_message_leaf,
               BOUNDED_LEAF, v0, decode_message_leaf),
        Vector("stream message leaf (SYS_UNKNOWN reject)", lambda: fx.BOUNDED_UNKNOWN, encode_message_leaf,
               BOUNDED_LEAF, v0, decode_message_leaf),
        Vector("callback leaf (bounded-wait)", lambda: fx.BOUNDED_CALLBACK, lambda c: leaf_bytes(callback_leaf_value(c)),
               BOUNDED_LEAF, v0, lambda d: callback_from_value(_generic_leaf(d))),
        Vector("call context leaf (bounded-wait origin)", lambda: fx.BOUNDED_CALL_CONTEXT,
               lambda c: leaf_bytes(call_context_leaf_value(c)), BOUNDED_LEAF, v0,
               lambda d: call_context_from_value(_generic_leaf(d))),
        Vector("state encoding (bounded-wait calls)", fx.state_with_bounded_wait_calls, encode_state,
               "state_manager.state_codec.BOUNDED_WAIT_STATE_ENCODING_VERSION", v0, decode_state),
        Vector("batch (bounded-wait calls)", fx.batch_with_bounded_wait_calls, encode_batch,
               "message_routing.batch.BOUNDED_WAIT_BATCH_ENCODING_VERSION", v0, decode_batch),
        Vector("fixture full state hash (bounded-wait calls)",
               lambda: build_state_trees(fx.state_with_bounded_wait_calls()), lambda t: t.full_hash,
               unversioned_note="the full state hash of every subnet with bounded-wait calls"),
        Vector("certified height leaf", lambda: fx.HEIGHT, cs.height_leaf, LEAF, v0, _generic_leaf),
        # canister logs (issue 24): state encoding version 4, the log under /canister_state/<id>/log
        Vector("state encoding (canister logs)", fx.state_with_canister_log, encode_state,
               "state_manager.state_codec.LOG_STATE_ENCODING_VERSION", v0, decode_state),
        Vector("canister snapshot (canister log)", lambda: fx.state_with_canister_log().canisters[9],
               encode_canister_snapshot, SNAPSHOT, v0, decode_canister_snapshot),
        Vector("fixture full state hash (canister logs)",
               lambda: build_state_trees(fx.state_with_canister_log()), lambda t: t.full_hash,
               unversioned_note="the full state hash of every subnet whose canisters logged"),
        Vector("fixture certified root (canister logs)",
               lambda: build_state_trees(fx.state_with_canister_log()), lambda t: t.certified_root,
               unversioned_note="the certified root of a state with canister logs: the logs are not certified, "
                                "so it equals the root without them"),
        # state_manager.state_codec
        Vector("state encoding", fx.state_with_source_canister, encode_state,
               "state_manager.state_codec.STATE_ENCODING_VERSION", v0, decode_state),
        Vector("checkpoint manifest", _checkpoint, _encode_checkpoint_manifest, "state_manager.store.MANIFEST_VERSION",
               v0, _decode_checkpoint_manifest),
        # state_manager.certification
        Vector("certification share", lambda: fx.certification_shares()[0], cm.encode_certification_share, SHARE, v0,
               cm.decode_certification_share),
        Vector("certification", fx.certification, cm.encode_certification, CERT, v0, cm.decode_certification),
        # state_manager.tree_encoding (inside certified slices)
        Vector("hash tree encoding (spec example tree)", fx.spec_example_tree, encode_tree, SLICE, None,
               lambda d: decode_tree(d, max_bytes=1 << 20, max_depth=64), ht.trees_equal),
        Vector("hash tree encoding (witness shape)", fx.witness_tree, encode_tree, SLICE, None,
               lambda d: decode_tree(d, max_bytes=1 << 20, max_depth=64), ht.trees_equal),
        # state_manager.certified_slice
        Vector("certified stream slice", _expected_slice, _slice_bytes, SLICE, v0, _decode_slice, reencode=None),
        # message_routing.batch
        Vector("batch", fx.batch, encode_batch, "message_routing.batch.BATCH_ENCODING_VERSION", v0, decode_batch),
        # consensus_stub
        Vector("block", fx.block, block_module.encode_block, BLOCK, v0, block_module.decode_block),
        Vector("block hash", fx.block, block_module.block_hash, BLOCK),
        Vector("block randomness", fx.block, lambda b: block_module.block_randomness(block_module.block_hash(b)), BLOCK),
        Vector("block log", fx.chain, _encode_block_log, "consensus_stub.block_store.LOG_VERSION",
               lambda data: int.from_bytes(data[8:12], "big"), _decode_block_log),
        Vector("block log finalized mark", fx.chain, _encode_finalized_mark, "consensus_stub.block_store.LOG_VERSION",
               None, lambda mark: _decode_block_log(_encode_block_log(fx.chain()), mark), reencode=None),
        Vector("registry", fx.registry, encode_registry, "consensus_stub.registry.REGISTRY_ENCODING_VERSION", v1,
               decode_registry),
        Vector("node secrets", fx.node_secrets, encode_node_secrets, None, v1, decode_node_secrets,
               private_version="consensus_stub.genesis._SECRETS_VERSION",
               expect=lambda d, b: (d.node_id, d.subnet_id, d.node_index, d.secret_share, d.identity.certificate_pem(),
                                    d.identity.private_key_pem(), d.signing_key) == (
                                        b.node_id, b.subnet_id, b.node_index, b.secret_share,
                                        b.identity.certificate_pem(), b.identity.private_key_pem(), b.signing_key)),
        # replica.client.envelope: the IC's CBOR envelopes (version 2; version 1, msgpack, is refused)
        Vector("ingress envelope", lambda: fx.ENVELOPE_CALL, lambda call: sign_ingress(fx.user_key(), **call), ENVELOPE,
               decode=_decode_envelope, expect=lambda decoded, _: decoded == fx.envelope_ingress(), reencode=None),
        Vector("ingress envelope (secp256k1)", lambda: fx.ENVELOPE_CALL,
               lambda call: sign_ingress(fx.secp256k1_user_key(), **call), ENVELOPE, decode=_decode_envelope,
               expect=lambda decoded, _: decoded == fx.envelope_ingress(fx.secp256k1_user_key()), reencode=None),
        Vector("ingress query envelope (anonymous)", lambda: fx.ANONYMOUS_QUERY, lambda _: fx.anonymous_query(),
               ENVELOPE, decode=lambda d: decode_signed_ingress(d, 1 << 16, now_ns=fx.TIME, request_type=QUERY),
               expect=lambda decoded, _: (decoded.source, decoded.receiver, decoded.method_name)
               == (b"\x04", MANAGEMENT_CANISTER_ID, "get"), reencode=None),
        Vector("ingress message id", fx.envelope_content, request_id, ENVELOPE),
        # xnet.grpc.messages
        Vector("xnet GetStreamSlice request", lambda: wire.GetStreamSliceRequest(*slice_wire),
               wire.encode_get_stream_slice_request, WIRE, v0, wire.decode_get_stream_slice_request),
        Vector("xnet GetStreamSlice response", lambda: b"\x94certified slice bytes", wire.encode_get_stream_slice_response,
               WIRE, v0, lambda d: wire.decode_get_stream_slice_response(d, max_slice_bytes=1 << 20)),
        Vector("xnet ListStreams request", lambda: None, lambda _: wire.encode_list_streams_request(), WIRE, v0,
               wire.decode_list_streams_request),
        Vector("xnet ListStreams response", lambda: [fx.A, fx.B, "subnet-c"], wire.encode_list_streams_response, WIRE,
               v0, lambda d: wire.decode_list_streams_response(d, max_bytes=1 << 16)),
        # consensus_stub.agreement: one vector per message kind
        *(Vector(f"agreement message ({kind})", lambda kind=kind: fx.agreement_messages()[kind], encode_message,
                 MESSAGE, v0, decode_message) for kind in fx.agreement_messages()),
        # replica.node.node_store: a node process's own records
        Vector("node agreement log (signed artifacts)", fx.signed_artifacts,
               _written("agreement.log", _write_agreement_log), None, _magic_version(6),
               _read(_read_agreement_log), private_version='the magic b"agrlog02" of replica.node.node_store'),
        Vector("node executed-height log", fx.executed_entries, _written("executed.log", _write_executed_log), None,
               _magic_version(7), _read(_read_executed_log),
               private_version='the magic b"execlog1" of replica.node.node_store'),
        Vector("node finalization proof file",
               lambda: (fx.HEIGHT, fx.digest("finalized block"), fx.finalization_proof()),
               _written("proof.bin", lambda path, proof: ProofFile(path).write(*proof)),
               decode=_read(lambda path: ProofFile(path).read()),
               unversioned_note="a node's latest finalization proof (replica.node.node_store.ProofFile), which "
                                "a restarted node reads: it carries no version, so a change must still read the old "
                                "file"),
        # replica.node.state_sync: the FetchCheckpoint method of the agreement service
        Vector("state sync offer (FetchCheckpoint response)", _offer, sync.encode_offer,
               "replica.node.state_sync.OFFER_VERSION", v0, sync.decode_offer),
        Vector("state sync FetchCheckpoint request", lambda: None, lambda _: sync.encode_fetch_request(),
               "replica.node.state_sync.FETCH_REQUEST_VERSION", lambda data: encoding.decode(data),
               sync.check_fetch_request, expect=lambda decoded, _: decoded == sync.FETCH_REQUEST_VERSION,
               reencode=lambda _: sync.encode_fetch_request()),
        # state_manager.canister_snapshot: a canister moving between subnets
        Vector("canister snapshot", lambda: fx.state().canisters[7], encode_canister_snapshot, SNAPSHOT, v0,
               decode_canister_snapshot),
        Vector("canister snapshot (source canister)", lambda: fx.state_with_source_canister().canisters[9],
               encode_canister_snapshot, SNAPSHOT, v0, decode_canister_snapshot),
        Vector("canister snapshot (bounded-wait calls)", lambda: fx.state_with_bounded_wait_calls().canisters[7],
               encode_canister_snapshot, SNAPSHOT, v0, decode_canister_snapshot),
        # replica.ic.http_interface, replica.client.answers: the IC HTTP interface's bodies
        Vector("HTTP read_state answer (IC certificate)",
               lambda: Certificate(fx.witness_tree(), fx.certification().signature),
               lambda c: encode_read_state_answer(encode_certificate(c)),
               decode=lambda d: decode_certificate(decode_read_state_answer(d, 1 << 20)),
               expect=lambda d, b: ht.trees_equal(d.tree, b.tree) and d.signature == b.signature and d.delegation is None,
               reencode=lambda c: encode_read_state_answer(encode_certificate(c)), unversioned_note=HTTP_NOTE),
        Vector("HTTP v3 call answer (replied)", lambda: CallAnswer("replied", certificate=b"certificate-bytes"),
               encode_call_answer, decode=lambda d: decode_call_answer(d, 1 << 16), unversioned_note=HTTP_NOTE),
        Vector("HTTP query answer (reply, node-signed)",
               lambda: QueryResponse(QueryReplied(b"reply-bytes"),
                                     (sign_query_response(QueryReplied(b"reply-bytes"), fx.digest("query"),
                                                          1_700_000_000_000_000_000, fx.node_signing_identity()),)),
               encode_query_response, decode=lambda d: decode_query_response(d, max_bytes=1 << 16),
               unversioned_note=HTTP_NOTE),
        Vector("HTTP dry_run answer",
               lambda: DryRunResult(fx.HEIGHT, "waiting", None, None, None, 1234, False,
                                    (OutgoingCall(1000, "pong", b"arg", 0), OutgoingCall(7, "m", b"", 1_700_000_000)),
                                    ("/canister_state/1/stable/pings_sent", "/ingress_history/0x01@2"), 3),
               encode_dry_run_answer, decode=lambda d: decode_dry_run_answer(d, 1 << 16),
               unversioned_note=HTTP_NOTE),
        # replica.audit and replica.testnet recordings
        Vector("run log blob", fx.run_log, encode_run_log, "replica.audit.run_log.RUN_LOG_VERSION", v1, decode_run_log),
        Vector("run log directory manifest", fx.run_log, _encode_run_dir_manifest,
               "replica.audit.run_log.RUN_LOG_VERSION", v1, _decode_run_dir_manifest),
        Vector("run log subnet file", fx.run_log, _encode_subnet_file, "replica.audit.run_log.SUBNET_FILE_VERSION", v1,
               _decode_subnet_file, expect=lambda decoded, log: decoded == log.subnets[0], reencode=None),
        Vector("run log build record", fx.build_info, lambda b: encoding.encode(build_to_value(b)), None, v1,
               lambda d: build_from_value(encoding.decode(d)), private_version="replica.audit.build._BUILD_VERSION"),
        Vector("live feed context", _live_context, encode_context, "replica.audit.live_feed.FEED_VERSION", v1,
               decode_context),
        Vector("live feed chunk", lambda: (fx.A, tuple((h, f"batch {h}".encode(), fx.digest(f"full {h}"),
                                                         fx.digest(f"root {h}")) for h in (4, 5))),
               lambda c: encode_chunk(*c), "replica.audit.live_feed.FEED_VERSION", v1, decode_chunk),
        Vector("subnet recording", fx.recording, encode_recording, None, v1, decode_recording,
               private_version="replica.testnet.recording._VERSION"),
        Vector("audit child request", lambda: ("rows", 12345, b"run blob", ((1, "x"), (2, "y"))),
               lambda r: encode_request(*r), None, v1, decode_request,
               private_version="replica.audit.isolation._VERSION"),
        Vector("audit child answer", lambda: ((fx.A, 1, b"full", b"root", None),), encode_answer, None, v1,
               decode_answer, private_version="replica.audit.isolation._VERSION"),
        Vector("audit report (comparable part)", fx.audit_facts, _report_bytes, "replica.audit.report.REPORT_VERSION",
               _json_version),
        # unversioned derivations
        Vector("hash tree root (spec example tree)", fx.spec_example_tree, ht.reconstruct,
               unversioned_note="the interface specification's hashing (the specification fixes this root)"),
        Vector("canister module hash", lambda: fx.GoldenCanister, module_hash,
               unversioned_note="every canister's /canister/<id>/module_hash and so every state root"),
        Vector("fixture certified root", fx.trees, lambda t: t.certified_root,
               unversioned_note="every certified state root: a leaf encoding (bump LEAF_VERSION) or the tree layout"),
        Vector("fixture full state hash", fx.trees, lambda t: t.full_hash,
               unversioned_note="every full state hash: a leaf encoding (bump LEAF_VERSION) or the tree layout"),
        Vector("fixture full state hash (source canister, management queue)",
               lambda: build_state_trees(fx.state_with_source_canister()), lambda t: t.full_hash,
               unversioned_note="the full state hash of every subnet with a source canister or queued management calls"),
        Vector("fixture certified root (source canister, empty canister)",
               lambda: build_state_trees(fx.state_with_source_canister()), lambda t: t.certified_root,
               unversioned_note="/canister/<id>/module_hash of source and empty canisters: every such state root"),
    ]


def all_vectors() -> list[Vector]:
    """The static table plus one vector per leaf path of the fixture state's full tree."""
    leaves = [_leaf_vector(path) for path in sorted(tree_leaves(fx.trees().full))]
    log_leaves = [_leaf_vector(path, _log_trees) for path in sorted(tree_leaves(_log_trees().full)) if "/log/" in path]
    return _static_vectors() + leaves + log_leaves


@lru_cache(maxsize=None)
def _log_trees() -> Any:
    """The trees of the canister-log fixture: their ``/canister_state/<id>/log`` leaves."""
    return build_state_trees(fx.state_with_canister_log())


def load_golden() -> list[dict]:
    return json.loads(GOLDEN_FILE.read_text())["vectors"]


def load_scenario() -> dict:
    return json.loads(GOLDEN_FILE.read_text())["scenario"]
