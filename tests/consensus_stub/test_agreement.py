"""Blocks (encoding, hash, batch), the block store and its log, makers, notary checks,
the ingress pool and the certification pool."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from consensus_stub import block as b
from consensus_stub import notary as nt
from consensus_stub.block_maker import ChainTip, block_maker_for, build_block, rank_of
from consensus_stub.block_log_records import encode_record
from consensus_stub.block_store import BlockLog, BlockStore, ChainError, CorruptBlockLog, open_block_store
from consensus_stub.certification_pool import CertificationPool
from consensus_stub.genesis import SubnetSpec, genesis_registry
from consensus_stub.ingress_pool import Admission, IngressPool
from message_routing.limits import DEFAULT
from state_manager.certification import sign_certification_share, verify_certification
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.messages import Ingress
from state_manager.replicated_state import ReplicatedState
from xnet.slice_pool import SlicePool

NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
T0 = 1_700_000_000 * 10**9
SEC = 10**9


@pytest.fixture(scope="module")
def dealt():
    return genesis_registry([SubnetSpec("alpha", 4, ((0, 999),)), SubnetSpec("beta", 1, ((1000, 1999),))],
                            b"agreement-test-seed-of-32-bytes!", not_before=NOT_BEFORE)


def ingress(n: int, receiver: int = 5, expiry: int = T0 + 60 * SEC, payload: bytes = b"") -> Ingress:
    return Ingress(b"user", receiver, "m", payload, n.to_bytes(32, "big"), expiry)


def genesis_state(registry) -> ReplicatedState:
    state = ReplicatedState("alpha", registry.topology(1))
    state.metadata.batch_time = T0
    return state


def block(height=1, parent=b.GENESIS_PARENT_HASH, time=T0 + SEC, ingress_=(), payload=(), maker="alpha-node-1", rank=0):
    return b.Block(height, parent, time, 1, tuple(ingress_), tuple(payload), maker, rank)


# -- blocks ---------------------------------------------------------------------------------

def test_block_round_trip_hash_and_batch():
    blk = block(ingress_=[ingress(1), ingress(2)], payload=[("beta", b"slice")])
    data = b.encode_block(blk)
    assert b.decode_block(data) == blk
    digest = b.block_hash(blk)
    assert digest != b.block_hash(dataclasses.replace(blk, rank=1))
    batch = b.to_batch(blk, ())
    assert (batch.batch_number, batch.time, batch.registry_version, batch.ingress) == (1, T0 + SEC, 1, blk.ingress)
    assert batch.randomness == b.block_randomness(digest)
    assert b.payload_byte_size(blk) == sum(i.count_bytes() for i in blk.ingress) + 5
    for bad in (data + b"\x00", data[:-1], b.encode_block(blk).replace(b"\x99\x01", b"\x99\x02", 1)):
        with pytest.raises(b.MalformedBlock):
            b.decode_block(bad)
    with pytest.raises(b.MalformedBlock):
        block(payload=[("beta", b"x"), ("alpha", b"y")])  # unsorted payload
    with pytest.raises(b.MalformedBlock):
        block(height=0)


def test_block_store_chains_and_the_log_survives_a_torn_tail(tmp_path):
    path = tmp_path / "blocks.log"
    store = open_block_store(path)
    first = block()
    h1 = store.append(first)
    second = block(height=2, parent=h1, time=T0 + 2 * SEC)
    store.append(second)
    with pytest.raises(ChainError):
        store.append(block(height=3, parent=b"\x01" * 32))
    with pytest.raises(ChainError):
        store.append(block(height=5, parent=store.tip_hash))
    store.close()
    assert open_block_store(path).blocks_from(1) == [first, second]
    # a crash in the middle of the third append leaves a torn record: it is cut off
    data = path.read_bytes()
    third = encode_record(b.encode_block(block(height=3, parent=b.block_hash(second), time=T0 + 3 * SEC)))
    path.write_bytes(data + third[: len(third) // 3])
    reopened = open_block_store(path)
    assert reopened.height == 2 and reopened.hash_at(2) == b.block_hash(second)
    reopened.close()
    assert path.read_bytes() == data
    # a flipped bit in the second record: refused, the file untouched (tests/consensus_stub/test_block_store.py)
    corrupted = bytearray(data)
    corrupted[-40] ^= 1
    path.write_bytes(bytes(corrupted))
    with pytest.raises(CorruptBlockLog):
        BlockLog.open(path)
    assert path.read_bytes() == bytes(corrupted)
    assert BlockStore().tip_hash == b.GENESIS_PARENT_HASH


# -- makers ---------------------------------------------------------------------------------

def test_round_robin_makers(dealt):
    registry, _ = dealt
    alpha = registry.subnet("alpha", 1)
    assert [block_maker_for(alpha, h, 0) for h in range(1, 6)] == [
        "alpha-node-1", "alpha-node-2", "alpha-node-3", "alpha-node-4", "alpha-node-1"]
    assert block_maker_for(alpha, 2, 1) == "alpha-node-3"
    for height in range(1, 9):
        for node in alpha.node_ids:
            assert block_maker_for(alpha, height, rank_of(alpha, height, node)) == node


# -- the ingress pool ----------------------------------------------------------------------

def test_ingress_pool_admission_selection_and_expiry():
    pool = IngressPool(max_messages=3)
    ttl, size = 60 * SEC, 1000
    assert pool.add(ingress(1), T0, ttl, size) is Admission.ADDED
    assert pool.add(ingress(1), T0, ttl, size) is Admission.DUPLICATE
    assert pool.add(ingress(2, expiry=T0 - 1), T0, ttl, size) is Admission.EXPIRED
    assert pool.add(ingress(3, expiry=T0 + ttl + 1), T0, ttl, size) is Admission.EXPIRY_TOO_FAR
    assert pool.add(ingress(4, payload=b"x" * size), T0, ttl, size) is Admission.TOO_LARGE
    assert pool.add(ingress(5, expiry=T0 + 10 * SEC), T0, ttl, size) is Admission.ADDED
    assert pool.add(ingress(6), T0, ttl, size) is Admission.ADDED
    assert pool.add(ingress(7), T0, ttl, size) is Admission.POOL_FULL
    assert [i.message_id[-1] for i in pool.select(T0, 10_000, 10)] == [1, 5, 6]
    assert [i.message_id[-1] for i in pool.select(T0, 10_000, 2)] == [1, 5]
    assert [i.message_id[-1] for i in pool.select(T0 + 20 * SEC, 10_000, 10)] == [1, 6]  # 5 expired
    one = ingress(1).count_bytes()
    assert [i.message_id[-1] for i in pool.select(T0, one, 10)] == [1]
    assert [i.message_id[-1] for i in pool.select(T0, 10_000, 10, lambda i: i.message_id[-1] == 1)] == [5, 6]
    pool.remove([ingress(1)])
    assert ingress(1).message_id not in pool and len(pool) == 2
    assert pool.add(ingress(1), T0, ttl, size) is Admission.DUPLICATE  # included already
    assert pool.purge_expired(T0 + 20 * SEC) == 1
    assert len(pool) == 1 and pool.byte_size == ingress(6).count_bytes()
    pool.purge_expired(T0 + 61 * SEC)
    assert pool.add(ingress(1, expiry=T0 + 100 * SEC), T0 + 61 * SEC, ttl, size) is Admission.ADDED


# -- block making and the notary -------------------------------------------------------------

def test_built_blocks_validate_and_bad_ones_are_refused(dealt):
    registry, _ = dealt
    state = genesis_state(registry)
    pool = IngressPool()
    for n in range(3):
        pool.add(ingress(n), T0, DEFAULT.max_ingress_ttl_ns, DEFAULT.max_ingress_bytes)
    # pooled while routed here, say, but beta's at the block's registry version: the notary would refuse it
    pool.add(ingress(3, receiver=1005), T0, DEFAULT.max_ingress_ttl_ns, DEFAULT.max_ingress_bytes)
    state.ingress_history.set(ingress(0).message_id,
                              IngressStatus(IngressState.RECEIVED, 5, b"user", T0, T0 + 60 * SEC))
    tip = ChainTip(0, b.GENESIS_PARENT_HASH)
    blk = build_block(tip=tip, now=T0 + SEC, registry_version=1, maker="alpha-node-1", rank=0, state=state,
                      past_payloads=(), ingress_pool=pool, slice_pool=SlicePool("alpha", 1 << 20), limits=DEFAULT,
                      routing_table=registry.record(1).routing_table)
    # 0 is in the ingress history already; 3 is for beta's canister
    assert [i.message_id[-1] for i in blk.ingress] == [1, 2]
    assert blk.xnet_payload == () and blk.time == T0 + SEC
    validate = lambda candidate, **kw: nt.validate_block(  # noqa: E731
        candidate, tip=tip, state=state, past_payloads=(), registry=registry, limits=DEFAULT, **kw)
    assert validate(blk, now=T0 + SEC) == ()
    refused = {
        nt.WrongHeight: dataclasses.replace(blk, height=2),
        nt.WrongParent: dataclasses.replace(blk, parent_hash=b"\x01" * 32),
        nt.WrongMaker: dataclasses.replace(blk, maker="alpha-node-2"),
        nt.TimeRegresses: dataclasses.replace(blk, time=T0 - 1),
        nt.InvalidIngressInBlock: dataclasses.replace(blk, ingress=blk.ingress + blk.ingress[:1]),
        nt.InvalidXNetPayloadInBlock: dataclasses.replace(blk, xnet_payload=(("beta", b"garbage"),)),
    }
    for error, candidate in refused.items():
        with pytest.raises(error):
            validate(candidate)
    with pytest.raises(nt.TimeInFuture):
        validate(blk, now=T0 - nt.DEFAULT_MAX_CLOCK_SKEW_NS)
    with pytest.raises(nt.InvalidIngressInBlock):  # already inducted
        validate(dataclasses.replace(blk, ingress=(ingress(0),)))
    with pytest.raises(nt.InvalidIngressInBlock):  # not a canister of this subnet
        validate(dataclasses.replace(blk, ingress=(ingress(9, receiver=1500),)))
    with pytest.raises(nt.InvalidIngressInBlock):  # expired at the block time
        validate(dataclasses.replace(blk, ingress=(ingress(9, expiry=T0),)))
    with pytest.raises(nt.BlockNotYetValid):  # a registry version we do not know yet
        validate(dataclasses.replace(blk, registry_version=2))
    with pytest.raises(nt.BlockPayloadTooLarge):
        nt.validate_block(blk, tip=tip, state=state, past_payloads=(), registry=registry,
                          limits=DEFAULT.with_(max_block_payload_bytes=64))


def test_ingress_pooled_before_its_canister_moved_away_goes_into_a_block_to_be_answered(dealt):
    from state_manager.routing_table import CanisterIdRange
    registry, _ = dealt
    moved = registry.with_next_version(
        routing_table=registry.latest().routing_table.with_assignment(CanisterIdRange(5, 5), "beta"))
    state = genesis_state(registry)
    pool = IngressPool()
    for n, receiver in enumerate((5, 1005)):   # 5 was alpha's until version 2; 1005 never was
        pool.add(ingress(n, receiver=receiver), T0, DEFAULT.max_ingress_ttl_ns, DEFAULT.max_ingress_bytes)
    tip = ChainTip(0, b.GENESIS_PARENT_HASH)
    blk = build_block(tip=tip, now=T0 + SEC, registry_version=2, maker="alpha-node-1", rank=0, state=state,
                      past_payloads=(), ingress_pool=pool, slice_pool=SlicePool("alpha", 1 << 20), limits=DEFAULT,
                      routing_table=moved.record(2).routing_table,
                      hosted_before=lambda canister_id: moved.has_hosted("alpha", canister_id, 2))
    assert [i.receiver for i in blk.ingress] == [5]
    validate = lambda candidate: nt.validate_block(  # noqa: E731
        candidate, tip=tip, state=state, past_payloads=(), registry=moved, limits=DEFAULT, now=T0 + SEC)
    assert validate(blk) == ()
    with pytest.raises(nt.InvalidIngressInBlock, match="never on this subnet"):
        validate(dataclasses.replace(blk, ingress=(ingress(1, receiver=1005),)))


# -- certification shares --------------------------------------------------------------------

def test_certification_pool_aggregates_t_valid_shares(dealt):
    registry, secrets = dealt
    alpha = registry.subnet("alpha", 1)
    pool = CertificationPool(alpha)
    root, other = b"\x05" * 32, b"\x06" * 32
    share = lambda node, r=root, h=4: sign_certification_share(  # noqa: E731
        h, r, secrets[node].node_index, secrets[node].secret_share)
    assert pool.add_share(share("alpha-node-1")) is None
    assert pool.add_share(share("alpha-node-1")) is None        # duplicate
    assert pool.add_share(share("alpha-node-2", other)) is None  # another root does not count
    bogus = dataclasses.replace(share("alpha-node-3"), signature_share=share("alpha-node-4").signature_share)
    assert pool.add_share(bogus) is None                         # three shares, one invalid
    cert = pool.add_share(share("alpha-node-4"))
    assert cert is None  # node 3's slot is taken by its bogus share; only two valid ones agree
    fresh = CertificationPool(alpha)
    for node in ("alpha-node-1", "alpha-node-3"):
        assert fresh.add_share(share(node)) is None
    cert = fresh.add_share(share("alpha-node-4"))
    assert cert is not None and (cert.height, cert.root) == (4, root)
    verify_certification(cert, alpha.public_key)
    assert fresh.certification(4) == cert and fresh.add_share(share("alpha-node-2")) == cert
    fresh.purge_below(5)
    assert fresh.certification(4) is None
