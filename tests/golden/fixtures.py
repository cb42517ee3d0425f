"""Fixed, representative values for the golden vectors, built deterministically.

Everything here is a pure function of constants in this file (fixed seeds, fixed keys, fixed
ids): no clocks, no OS randomness. BLS keys are dealt with ``bls.deal_threshold_keys``
from fixed seeds and BLS, Ed25519 and ECDSA (RFC 6979) signatures are deterministic, so
certifications, slices and envelopes come out byte-identical on every run. The one TLS identity (node secrets) is a
committed, test-only key pair under ``data/``: TLS keys are drawn from OS randomness.

Only public names of the product are used. The values cover every field of every encoding
(both message kinds, both response payloads, every ingress state, both call origins, reject
signals, migrations, reserved slots, stable values of every scalar type, ...), so a change
to any field's encoding changes some golden bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from functools import lru_cache
from pathlib import Path

from consensus_stub.agreement.messages import (
    CatchUp, CertificationShareGossip, FinalizationShare, IngressGossip, Message, NotarizationShare, Proposal, Status,
)
from consensus_stub.block import GENESIS_PARENT_HASH, Block, block_hash
from consensus_stub.genesis import NodeSecrets
from consensus_stub.node_keys import load_node_identity
from consensus_stub.node_signing_key import der_public_key, derive_signing_key
from consensus_stub.registry import NodeRecord, Registry, RegistryRecord, SubnetRecord
from message_routing.batch import Batch
from message_routing.limits import Limits
from replica.audit.build import BuildInfo
from replica.audit.report import AuditFacts
from replica.audit.run_log import RunLog, SubnetLog
from replica.client.envelope import QUERY, request_content, sign_ingress, sign_request
from replica.client.identity import Ed25519Identity, Secp256k1Identity, source_of
from replica.execution.codec import encode_value
from replica.ic.request_id import request_id
from replica.sdk import Canister
from replica.testnet.recording import SubnetRecording
from state_manager import certification as cm
from state_manager import bls
from state_manager.canister_log import CanisterLog, LogRecord
from state_manager.canister_state import (
    CallContext, Callback, CanisterOrigin, CanisterState, CanisterStatus, IngressOrigin,
)
from state_manager.hash_tree import Empty, Fork, Labeled, Leaf, Pruned
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.messages import MANAGEMENT_CANISTER_ID, Ingress, Reject, RejectCode, Reply, Request, Response
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import CanisterIdRange, CanisterMigrations, NetworkTopology, RoutingTable
from state_manager.state_tree import StateTrees, build_state_trees
from state_manager.streams import RejectReason, RejectSignal, Stream, StreamHeader, StreamSlice

DATA = Path(__file__).with_name("data")

A, B = "subnet-a", "subnet-b"
REGISTRY_VERSION = 3
HEIGHT = 5
TIME = 1_700_000_000_123_456_789
N, T = 4, 3


def digest(tag: str) -> bytes:
    """A fixed 32-byte value named by ``tag``."""
    return hashlib.sha256(b"golden:" + tag.encode()).digest()


# -- keys --------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def deal(subnet: str) -> bls.ThresholdKeys:
    """A 3-of-4 threshold key for ``subnet``, dealt from a fixed seed."""
    return bls.deal_threshold_keys(N, T, digest("deal " + subnet))


def public_key_for(subnet: str, registry_version: int) -> bytes | None:
    if registry_version != REGISTRY_VERSION or subnet not in (A, B):
        return None
    return deal(subnet).public_key


def user_key() -> Ed25519Identity:
    return Ed25519Identity.from_seed(b"golden user")


def secp256k1_user_key() -> Secp256k1Identity:
    return Secp256k1Identity.from_seed(b"golden user")


# -- messages ----------------------------------------------------------------------------------

REQUEST = Request(sender=7, receiver=150, method_name="transfer", method_payload=b"\x01\x02pay", sender_reply_callback=2)
REPLY = Response(originator=120, respondent=7, originator_reply_callback=4, response_payload=Reply(b"reply-bytes"))
REJECT = Response(originator=130, respondent=7, originator_reply_callback=9,
                  response_payload=Reject(RejectCode.CANISTER_REJECT, "no thanks \u2713"))
HEADER = StreamHeader(begin=3, end=6, signals_end=9, reject_signals=(
    RejectSignal(6, RejectReason.CANISTER_NOT_FOUND), RejectSignal(8, RejectReason.QUEUE_FULL)))
STREAM_MESSAGES = (REQUEST, REPLY, REJECT)
#: Bounded-wait messages (issue 17): a deadline in whole seconds, leaf version 2.
DEADLINE = TIME // 10**9 + 30
BOUNDED_REQUEST = Request(7, 150, "transfer", b"\x01\x02pay", 3, DEADLINE)
BOUNDED_REPLY = Response(120, 7, 5, Reply(b"reply-bytes"), DEADLINE)
BOUNDED_UNKNOWN = Response(7, 150, 3, Reject(RejectCode.SYS_UNKNOWN, "call deadline has expired"), DEADLINE)
BOUNDED_CALLBACK = Callback(3, 0, 150, "on_reply", "on_reject", "ctx", DEADLINE)
BOUNDED_CALL_CONTEXT = CallContext(2, CanisterOrigin(120, 5, DEADLINE), "call", False, 0)


def ingress(n: int, receiver: int = 7, method: str = "update") -> Ingress:
    return Ingress(source=b"\x11" * 29 + b"\x02", receiver=receiver, method_name=method,
                   method_payload=bytes([n]) * 3, message_id=digest(f"ingress {n}"), expiry_time=TIME + n * 10**9)


# -- state -------------------------------------------------------------------------------------

#: The subnet keys the fixture state's topology carries. The state encoding and its leaves hold
#: them as opaque bytes (nothing there parses a key), so they are fixed values here: the keys the
#: state vectors were first recorded with (48-byte keys of the project's former BLS variant). The
#: state vectors then pin the encodings, not the certification scheme; certifications, slices,
#: offers and the registry use ``deal``'s keys.
TOPOLOGY_KEYS = {
    A: bytes.fromhex("85bbe002b77f126f67f819bf0ea360bfcce7b091ed21a361c14ec12d6c602f22f183770d3ad1d03c03864b27ed1009b3"),
    B: bytes.fromhex("96fe7ad314827f4827ccc538c4324f3d377e60cf07bb704bb25c5d2a03eed7659f7f45d5fe29ad3063f0a76f55b39ba1"),
}


def topology() -> NetworkTopology:
    table = RoutingTable(((CanisterIdRange(0, 99), A), (CanisterIdRange(100, 199), B)))
    migrations = CanisterMigrations(((CanisterIdRange(50, 59), (A, B)),))
    return NetworkTopology(REGISTRY_VERSION, table, migrations, ((A, TOPOLOGY_KEYS[A]), (B, TOPOLOGY_KEYS[B])))


def _full_canister() -> CanisterState:
    c = CanisterState(7, "tests.golden.fixtures:GoldenCanister", digest("module"), controller=b"controller")
    c.certified_data = b"certified data"
    c.call_contexts[0] = CallContext(0, IngressOrigin(digest("ingress 1"), b"\x11" * 29 + b"\x02"), "update", False, 1)
    c.call_contexts[1] = CallContext(1, CanisterOrigin(120, 4), "call", True, 0)
    c.callbacks[0] = Callback(0, 0, 150, "on_reply", "on_reject", ("ctx", -5, b"\x00", True, None, (2**64 - 1,)))
    c.next_call_context_id = 2
    c.next_callback_id = 1
    q = c.queues
    q.push_ingress(ingress(2))
    q.push_input_request(Request(120, 7, "call", b"in", 4), capacity=10)   # reserves an output slot
    q.push_output_request(REQUEST, capacity=10)                            # reserves an input slot
    q.push_input_response(Response(7, 130, 8, Reply(b"late")))
    q.input_schedule = 120
    c.stable["balance"] = 1_000
    c.stable["name"] = "golden"
    c.stable["tuple"] = (b"bytes", "text", -(2**63), True, None, ())
    return c


def state() -> ReplicatedState:
    """Subnet A at height 5: two canisters, a stream to B, the loopback stream, every ingress state."""
    s = ReplicatedState(A, topology())
    m = s.metadata
    m.batch_number = HEIGHT
    m.batch_time = TIME
    m.prev_state_hash = digest("prev state")
    m.count("ingress_inducted", 3)
    m.count("reject_signals_sent", 2)
    s.add_canister(_full_canister())
    s.add_canister(CanisterState(8, "tests.golden.fixtures:GoldenCanister", digest("module"),
                                 status=CanisterStatus.STOPPED))
    s.streams[B] = Stream(HEADER.begin, STREAM_MESSAGES, HEADER.signals_end, HEADER.reject_signals)
    s.streams[A] = Stream(0, (Request(7, 8, "self", b"", 1),), 1)
    h = s.ingress_history
    source = b"\x22" * 29 + b"\x02"
    h.set(digest("status received"), IngressStatus(IngressState.RECEIVED, 7, source, TIME, TIME + 1))
    h.set(digest("status processing"), IngressStatus(IngressState.PROCESSING, 7, source, TIME, TIME + 2))
    h.set(digest("status replied"), IngressStatus(IngressState.REPLIED, 7, source, TIME, TIME + 3, reply=b"answer"))
    h.set(digest("status rejected"), IngressStatus(IngressState.REJECTED, 8, source, TIME, TIME + 4,
                                                   reject_code=RejectCode.CANISTER_ERROR, reject_message="trapped"))
    h.set(digest("status done"), IngressStatus(IngressState.DONE, 7, source, TIME - 1, TIME - 1))
    return s


#: The source of the fixture's source canister (module hash = SHA-256 of its UTF-8 bytes).
SOURCE_MODULE = (
    "from replica.sdk import Canister, update\n\n\n"
    "class Golden(Canister):\n"
    "    @update\n"
    "    def hello(self, name):\n"
    "        return f'hello, {name} \u2713'\n"
)


def state_with_source_canister() -> ReplicatedState:
    """``state()`` plus what state encoding version 2 added: a canister whose module is
    source (id 9), an empty created canister (id 10) and a queued management call."""
    s = state()
    source = SOURCE_MODULE
    c = CanisterState(9, "Golden", hashlib.sha256(source.encode()).digest(), controller=b"\x33" * 29 + b"\x02",
                      module_source=source)
    c.stable["greeted"] = 2
    s.add_canister(c)
    s.add_canister(CanisterState(10, "", b"", controller=b"\x33" * 29 + b"\x02"))
    s.management_queue.push(ingress(5, receiver=2**64 - 1, method="install_code"))
    s.management_queue.push(ingress(6, receiver=2**64 - 1, method="create_canister"))
    s.management_queue.pop()   # the queue's begin moves on
    return s


def state_with_bounded_wait_calls() -> ReplicatedState:
    """``state_with_source_canister()`` plus what state encoding version 3 added: a
    bounded-wait call out of canister 7 (callback, request in the output queue), one into it
    (call context, reply in the output queue) and a bounded-wait request in the stream."""
    s = state_with_source_canister()
    c = s.canisters[7]
    c.callbacks[3] = BOUNDED_CALLBACK
    c.call_contexts[2] = BOUNDED_CALL_CONTEXT
    c.queues.push_output_request(BOUNDED_REQUEST, capacity=10)
    c.queues.push_output_response(BOUNDED_REPLY)
    s.stream_to(B).push(Request(8, 160, "m", b"", 0, DEADLINE))
    return s


def state_with_canister_log() -> ReplicatedState:
    """``state_with_bounded_wait_calls()`` plus what state encoding version 4 added: canister
    logs. Canister 9 keeps records 3..5 of the 6 it logged (the oldest dropped: indices
    start after a gap), one of them a trap record with a non-ASCII text; canister 10 logged
    and was purged (no records, its indices go on); canister 7 never logged."""
    s = state_with_bounded_wait_calls()
    s.canisters[9].log = CanisterLog.of(6, (
        LogRecord(3, TIME - 2 * 10**9, "hello, a \u2713"),
        LogRecord(4, TIME - 10**9, ""),
        LogRecord(5, TIME, "trapped: Trap: no (120 instructions)"),
    ))
    s.canisters[10].log = CanisterLog(2)
    return s


def batch_with_bounded_wait_calls() -> Batch:
    """``batch()`` whose slice also carries bounded-wait messages (batch encoding version 2)."""
    stream_slice = StreamSlice(StreamHeader(3, 8, 9, HEADER.reject_signals), 4,
                               SLICE_STREAM.messages + (BOUNDED_REQUEST, BOUNDED_UNKNOWN))
    return Batch(batch_number=HEIGHT, time=TIME, registry_version=REGISTRY_VERSION, randomness=digest("randomness"),
                 ingress=(ingress(1),), xnet_payload=((B, stream_slice),))


@lru_cache(maxsize=None)
def trees() -> StateTrees:
    return build_state_trees(state())


# -- certification and slice -------------------------------------------------------------------

def certification_shares(height: int = HEIGHT, root: bytes | None = None) -> list[cm.CertificationShare]:
    root = trees().certified_root if root is None else root
    return [cm.sign_certification_share(height, root, i, deal(A).secret_share(i)) for i in range(1, T + 1)]


@lru_cache(maxsize=None)
def certification() -> cm.Certification:
    """Subnet A's certification of the fixture state's certified root at height 5."""
    key_shares = {i: deal(A).public_key_share(i) for i in range(1, N + 1)}
    return cm.aggregate_certification(certification_shares(), T, deal(A).public_key, key_shares)


#: The slice A serves to B: witness from 3, messages 4 and 5.
SLICE_REQUEST = dict(remote_subnet=B, witness_begin=3, msg_begin=4, msg_limit=10, byte_limit=1 << 20)
SLICE_STREAM = StreamSlice(HEADER, 4, STREAM_MESSAGES[1:])


# -- hash trees --------------------------------------------------------------------------------

def spec_example_tree():
    """The interface specification's example tree (docs/architecture.md, *Hash trees and the
    certified state*)."""
    return Fork(
        Fork(
            Labeled(b"a", Fork(Fork(Labeled(b"x", Leaf(b"hello")), Empty()), Labeled(b"y", Leaf(b"world")))),
            Labeled(b"b", Leaf(b"good")),
        ),
        Fork(Labeled(b"c", Empty()), Labeled(b"d", Leaf(b"morning"))),
    )


def witness_tree():
    """A witness-shaped tree: pruned subtrees beside revealed labels and an empty node."""
    return Fork(Pruned(digest("left")), Labeled(b"streams", Fork(Labeled(b"\x00" * 8, Pruned(digest("leaf"))),
                                                                  Fork(Empty(), Pruned(digest("right"))))))


# -- batches, blocks, registry -----------------------------------------------------------------

def batch() -> Batch:
    return Batch(batch_number=HEIGHT, time=TIME, registry_version=REGISTRY_VERSION, randomness=digest("randomness"),
                 ingress=(ingress(1), ingress(2, receiver=8, method="other")),
                 xnet_payload=((B, SLICE_STREAM),))


def block(height: int = HEIGHT, parent: bytes | None = None) -> Block:
    return Block(height=height, parent_hash=digest("parent") if parent is None else parent, time=TIME + height,
                 registry_version=REGISTRY_VERSION, ingress=(ingress(height),),
                 xnet_payload=((B, b"certified slice bytes " + bytes([height])),), maker=f"{A}-node-2", rank=1)


def chain() -> list[Block]:
    """Two finalized blocks, chained from genesis."""
    first = block(1, GENESIS_PARENT_HASH)
    return [first, block(2, block_hash(first))]


PEM = b"-----BEGIN CERTIFICATE-----\ngolden (not a real certificate)\n-----END CERTIFICATE-----\n"


def registry() -> Registry:
    """Two versions: genesis of A and B, then a migration of canisters 50..59 from A to B."""
    subnets = tuple(SubnetRecord(s, tuple(f"{s}-node-{i}" for i in range(1, N + 1)), T, deal(s).public_key,
                                 deal(s).public_key_shares) for s in (A, B))
    nodes = tuple(NodeRecord(f"{s}-node-{i}", s, f"127.0.0.1:{4000 + 10 * k + i}", PEM,
                             der_public_key(node_signing_key(f"{s}-node-{i}")))
                  for k, s in enumerate((A, B)) for i in range(1, N + 1))
    table = RoutingTable(((CanisterIdRange(0, 99), A), (CanisterIdRange(100, 199), B)))
    first = RegistryRecord(1, subnets, nodes, table)
    second = RegistryRecord(REGISTRY_VERSION, subnets, nodes, table,
                            CanisterMigrations(((CanisterIdRange(50, 59), (A, B)),)))
    return Registry((first, second))


def node_signing_key(node_id: str) -> bytes:
    """The private bytes of ``node_id``'s Ed25519 signing key, as genesis derives them from a fixed seed."""
    return derive_signing_key(b"golden node signing keys", node_id)


def node_secrets() -> NodeSecrets:
    """Node 1 of A: its share of A's key, the committed test-only TLS identity and its signing key."""
    identity = load_node_identity((DATA / "subnet-a-node-1.cert.pem").read_bytes(),
                                  (DATA / "subnet-a-node-1.key.pem").read_bytes())
    return NodeSecrets(f"{A}-node-1", A, 1, deal(A).secret_share(1), identity, node_signing_key(f"{A}-node-1"))


# -- client, wire, audit -----------------------------------------------------------------------

ENVELOPE_CALL = dict(receiver=7, method_name="transfer", arg={"to": b"\x01" * 4, "amount": 30, "memo": ("x", None)},
                     nonce=3, expiry=TIME + 60 * 10**9)


def envelope() -> bytes:
    return sign_ingress(user_key(), **ENVELOPE_CALL)


def envelope_content(key=None) -> dict:
    """The content map of ``envelope()`` (signed by ``key``, default ``user_key()``)."""
    c = ENVELOPE_CALL
    sender = (key or user_key()).principal
    return request_content(sender, c["receiver"], c["method_name"], encode_value(c["arg"]), expiry=c["expiry"],
                           nonce=c["nonce"])


def envelope_ingress(key=None) -> Ingress:
    key = key or user_key()
    c = ENVELOPE_CALL
    return Ingress(source_of(key), c["receiver"], c["method_name"], encode_value(c["arg"]),
                   request_id(envelope_content(key)), c["expiry"])


#: An anonymous query of ``get`` on the management canister (the empty principal on the wire).
ANONYMOUS_QUERY = dict(canister=MANAGEMENT_CANISTER_ID, method_name="get", arg=encode_value(None),
                       expiry=TIME + 60 * 10**9, request_type=QUERY)


def anonymous_query() -> bytes:
    return sign_request(None, **ANONYMOUS_QUERY).envelope


def recording() -> SubnetRecording:
    return SubnetRecording(A, b"genesis state bytes", [b"batch 1", b"batch 2"],
                           [(1, digest("full 1"), digest("root 1")), (2, digest("full 2"), digest("root 2"))])


def limits() -> Limits:
    """Custom limits, one distinct value per field (independent of the presets' tuning)."""
    return Limits(**{f.name: 1_000 + k for k, f in enumerate(dataclasses.fields(Limits))})


def run_log() -> RunLog:
    logs = tuple(
        SubnetLog(s, f"genesis {s}".encode(), (b"batch 1", b"batch 2", b"batch 3"),
                  tuple((h, digest(f"{s} full {h}"), digest(f"{s} root {h}")) for h in (1, 2, 3)),
                  ((2, f"checkpoint {s} 2".encode()),))
        for s in (A, B))
    return RunLog(logs, ("examples.counter:Counter", "examples.ledger:Ledger"), "custom", limits(), 2, (topology(),))


def audit_facts() -> AuditFacts:
    """A clean audit of two subnets, no environment (the part of a report runs must agree on)."""
    return AuditFacts(
        source="runs/golden", subnets=[{"subnet": A, "batches": 3, "checkpoints": 1},
                                       {"subnet": B, "batches": 3, "checkpoints": 1}],
        canister_modules=["examples.counter:Counter"], limits="custom", replicas=4, seed=11, worker_hash_seed=0,
        from_genesis=True, faults=[], perturbation_counts={"none": 2, "hashseed": 2}, replica_batches=24, rows=24,
        error_rows=0, per_height=[(s, h, 4, 0) for s in (A, B) for h in (1, 2, 3)], split_groups=[], clusters=[],
        recorded_mismatches=[], incomplete=[], divergent_replicas=0)


def build_info() -> BuildInfo:
    """A recorded build: interpreter, two module digests, one compiled module, two dependencies."""
    modules = tuple((m, digest("module " + m)) for m in ("consensus_stub.block", "state_manager.codec"))
    return BuildInfo("CPython 3.11.2 .cpython-311-x86_64-linux-gnu.so", modules, ("state_manager.codec",),
                     (("cryptography", "42.0.5"), ("msgpack", "1.0.8")))


# -- agreement, a node's records, state sync ---------------------------------------------------

NODE_1, NODE_2, NODE_3 = (f"{A}-node-{i}" for i in (1, 2, 3))


def node_signature(tag: str) -> bytes:
    """A fixed stand-in for a node's signature (70 bytes, the length of a DER ECDSA P-256
    signature): ECDSA draws fresh randomness, and the encodings carry signatures as opaque bytes."""
    return digest("signature " + tag) + digest("signature tail " + tag)[:38]


def finalization_proof() -> tuple[tuple[str, bytes], ...]:
    """A quorum's finalization signatures on ``block()`` (sorted by signer, as a catch-up carries them)."""
    return tuple((n, node_signature(f"finalization {n}")) for n in (NODE_1, NODE_2, NODE_3))


def agreement_messages() -> dict[str, Message]:
    """One agreement message of every kind, named for its vector."""
    proposed = block()
    digest_ = block_hash(proposed)
    return {
        "proposal": Proposal(proposed, node_signature("proposal")),
        "notarization share": NotarizationShare(HEIGHT, digest_, NODE_1, node_signature("notarization")),
        "finalization share": FinalizationShare(HEIGHT, digest_, NODE_1, node_signature("finalization")),
        "status": Status(NODE_2, HEIGHT - 2, HEIGHT),
        "catch-up": CatchUp(tuple(chain()), finalization_proof()),
        "ingress gossip": IngressGossip((ingress(1), ingress(2, receiver=8, method="other"))),
        "certification share": CertificationShareGossip(dataclasses.replace(
            certification_shares()[0], height_witness=cm.certified_height_witness(trees().certified))),
    }


def signed_artifacts() -> list[Message]:
    """What a node's agreement log holds: a proposal and both shares it signed."""
    messages = agreement_messages()
    return [messages["proposal"], messages["notarization share"], messages["finalization share"]]


def executed_entries() -> list[tuple[int, bytes, bytes, bytes]]:
    """Two executed heights: (height, batch bytes, full state hash, certified root). The batch
    bytes are opaque to the log (the batch encoding has its own vectors)."""
    return [(h, f"batch bytes {h}".encode(), digest(f"full {h}"), digest(f"root {h}")) for h in (HEIGHT - 1, HEIGHT)]


class GoldenCanister(Canister):
    """A canister class whose module hash is pinned (``VERSION`` is part of the hash)."""

    VERSION = 3


def scratch_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="golden-")


def node_signing_identity():
    """Node 1 of A's Ed25519 signing identity (it signs query answers)."""
    from replica.ic.identities import Ed25519Identity   # noqa: PLC0415 - the replica's wire room, above the fixtures' imports
    return Ed25519Identity.from_private_bytes(node_signing_key(f"{A}-node-1"))
