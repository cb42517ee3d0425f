"""State sync: checkpoint offers (strict codec), their verification against the subnet key,
offers made from checkpoints on disk, and ``FetchCheckpoint`` over gRPC with mutual TLS."""

from __future__ import annotations

import dataclasses
import datetime
import threading
from functools import lru_cache

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consensus_stub.genesis import SubnetSpec, genesis_registry
from consensus_stub.node_keys import generate_node_identity
from replica.node import state_sync as ss
from replica.node.agreement_transport import (
    FETCH_CHECKPOINT_METHOD, AgreementClient, AgreementServer, CheckpointFetchError, NoCheckpoint, PeerAddress,
)
from state_manager.canister_state import CanisterState
from state_manager.certification import (
    Certification, aggregate_certification, encode_certification, sign_certification_share,
)
from state_manager.encoding import encode
from state_manager.state_codec import encode_state
from state_manager.state_tree import build_state_trees
from state_manager.store import CheckpointStore, CorruptCheckpoint
from tests.builders import B, request, state
from xnet.grpc.tls import tls_target_name

# TLS checks certificate validity against the real clock: valid from an hour ago
NOT_BEFORE = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
ALPHA, BETA = "alpha", "beta"
HEIGHT = 12
BLOCK_HASH = bytes(range(32))


@lru_cache(maxsize=None)
def dealt():
    return genesis_registry([SubnetSpec(ALPHA, 4, ((0, 999),)), SubnetSpec(BETA, 4, ((1000, 1999),))],
                            b"state-sync-test-seed-of-32-bytes", not_before=NOT_BEFORE)


def subnet_key(subnet: str) -> bytes:
    return dealt()[0].public_key_for(subnet, 1)


def make_state(subnet: str = ALPHA, height: int = HEIGHT, messages: int = 5):
    s = state(subnet)
    s.add_canister(CanisterState(7, "tests:Noop", b"\x00" * 32))
    stream = s.stream_to(B)
    for i in range(messages):
        stream.push(request(7, 100 + i, payload=bytes([i]) * 10))
    s.metadata.batch_number = height
    s.metadata.batch_time = 1_700_000_000 * 10**9 + height
    return s


def certify(subnet: str, height: int, root: bytes) -> Certification:
    registry, secrets = dealt()
    record = registry.subnet(subnet, 1)
    shares = [sign_certification_share(height, root, secrets[n].node_index, secrets[n].secret_share)
              for n in record.node_ids[: record.threshold]]
    return aggregate_certification(shares, record.threshold, record.public_key, record.key_shares_by_index())


def certified_offer(subnet: str = ALPHA, height: int = HEIGHT, **state_args) -> ss.CheckpointOffer:
    s = make_state(subnet, height, **state_args)
    return ss.CheckpointOffer(height, BLOCK_HASH, encode_state(s), certify(subnet, height, build_state_trees(s).certified_root))


@lru_cache(maxsize=None)
def good_offer() -> ss.CheckpointOffer:
    return certified_offer()


def verify(offer: ss.CheckpointOffer, key: bytes | None = None, *, subnet: str = ALPHA, min_height: int = HEIGHT):
    return ss.verify_offer(offer, subnet_key(ALPHA) if key is None else key, expected_subnet=subnet,
                           min_height=min_height)


# -- the offer codec ------------------------------------------------------------------------

def test_an_offer_round_trips_and_its_encoding_is_canonical():
    offer = good_offer()
    data = ss.encode_offer(offer)
    assert ss.decode_offer(data) == offer
    assert ss.encode_offer(ss.decode_offer(data)) == data
    assert ss.decode_offer(memoryview(data)) == offer
    assert len(repr(offer)) < 200 and "state_bytes=" in repr(offer)


def test_malformed_offers_are_refused_with_one_error_class(monkeypatch):
    offer = good_offer()
    data = ss.encode_offer(offer)
    fields = (ss.OFFER_VERSION, offer.height, offer.block_hash, offer.state_bytes,
              encode_certification(offer.certification))
    with pytest.raises(ss.UnsupportedOfferVersion):
        ss.decode_offer(encode((3, *fields[1:])))
    with pytest.raises(ss.UnsupportedOfferVersion, match="project's own BLS variant"):   # version 1
        ss.decode_offer(encode((1, *fields[1:])))
    with pytest.raises(ss.UnsupportedOfferVersion):
        ss.decode_offer(encode((b"x" * 100, *fields[1:])))
    cases = {
        "arity": encode(fields[:4]),
        "empty array": encode(()),
        "not an array": encode(1),
        "height 0": encode((ss.OFFER_VERSION, 0, *fields[2:])),
        "height not an int": encode((ss.OFFER_VERSION, b"\x0c", *fields[2:])),
        "short block hash": encode((ss.OFFER_VERSION, HEIGHT, b"\x00" * 31, *fields[3:])),
        "empty state": encode((ss.OFFER_VERSION, HEIGHT, BLOCK_HASH, b"", fields[4])),
        "state as text": encode((ss.OFFER_VERSION, HEIGHT, BLOCK_HASH, "state", fields[4])),
        "certification garbage": encode((*fields[:4], b"\x00")),
        "certification too large": encode((*fields[:4], b"\x00" * 2000)),
        "trailing bytes": data + b"\x00",
        "truncated": data[:-1],
        "non-canonical int": data.replace(b"\x0c", b"\xcc\x0c", 1),
        "not bytes": "offer",
    }
    for what, bad in cases.items():
        with pytest.raises(ss.MalformedOffer):
            ss.decode_offer(bad)  # type: ignore[arg-type]
    monkeypatch.setattr(ss, "MAX_OFFER_BYTES", len(data) - 1)
    with pytest.raises(ss.MalformedOffer, match="limit"):
        ss.decode_offer(data)


def test_offers_check_their_fields():
    offer = good_offer()
    for change in ({"height": 0}, {"height": True}, {"block_hash": b"x"}, {"state_bytes": b""},
                   {"state_bytes": bytearray(b"x")}, {"certification": b"cert"}):
        with pytest.raises(ss.MalformedOffer):
            dataclasses.replace(offer, **change)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_random_bytes_never_raise_anything_but_malformed_offer(data):
    try:
        offer = ss.decode_offer(data)
    except ss.MalformedOffer:
        return
    assert ss.encode_offer(offer) == data


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_offers_decode_canonically_or_raise_malformed_offer(data):
    valid = bytearray(ss.encode_offer(good_offer()))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(valid) - 1))
        valid[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(valid)))
    mutated = bytes(valid[:cut])
    try:
        offer = ss.decode_offer(mutated)
    except ss.MalformedOffer:
        return
    assert ss.encode_offer(offer) == mutated


# -- verification ------------------------------------------------------------------------------

def test_a_certified_offer_is_accepted_and_gives_the_state():
    offer = good_offer()
    installed = verify(offer)
    expected = make_state()
    assert installed.metadata.batch_number == HEIGHT and installed.own_subnet_id == ALPHA
    assert build_state_trees(installed).full_hash == build_state_trees(expected).full_hash
    assert verify(offer, min_height=1).metadata.batch_number == HEIGHT
    assert verify(ss.decode_offer(ss.encode_offer(offer))).metadata.batch_number == HEIGHT


def refusal(offer: ss.CheckpointOffer, **kwargs) -> ss.StateSyncRefused:
    with pytest.raises(ss.StateSyncRefused) as refused:
        verify(offer, **kwargs)
    return refused.value


def test_offers_that_must_not_be_installed_are_refused_with_a_reason():
    offer = good_offer()
    s = make_state()
    root = build_state_trees(s).certified_root
    other_root = build_state_trees(make_state(messages=6)).certified_root
    cases = {
        # a certification of another root at this height
        "root_mismatch": (dataclasses.replace(offer, certification=certify(ALPHA, HEIGHT, other_root)), {}),
        # a state of another height than offered, certified (its root) at the offered height
        "state_height": (dataclasses.replace(offer, state_bytes=encode_state(make_state(height=HEIGHT - 1)),
                                             certification=certify(ALPHA, HEIGHT, build_state_trees(
                                                 make_state(height=HEIGHT - 1)).certified_root)), {}),
        # a certification of another height
        "certification_height": (dataclasses.replace(offer, certification=certify(ALPHA, HEIGHT + 1, root)), {}),
        # a signature that does not verify: beta's signature on alpha's (height, root)
        "bad_certification": (dataclasses.replace(offer, certification=certify(BETA, HEIGHT, root)), {}),
        "height_too_low": (offer, {"min_height": HEIGHT + 1}),
        "state_does_not_decode": (dataclasses.replace(offer, state_bytes=b"\x93\x01\x02"), {}),
        "wrong_subnet": (certified_offer(BETA), {"key": subnet_key(BETA)}),
    }
    for reason, (bad, kwargs) in cases.items():
        error = refusal(bad, **kwargs)
        assert error.reason == reason, (reason, error)
        assert str(error).startswith(reason)
    assert isinstance(refusal(cases["root_mismatch"][0]), ss.RootMismatch)
    assert isinstance(refusal(offer, min_height=HEIGHT + 1), ss.OfferHeightTooLow)
    assert isinstance(refusal(cases["state_does_not_decode"][0]), ss.StateDoesNotDecode)


def test_bad_signatures_and_keys_are_refused():
    offer = good_offer()
    cert = offer.certification
    flipped = cert.signature[:-1] + bytes([cert.signature[-1] ^ 1])
    for signature in (bytes(96), flipped, b"\xc0" + bytes(95)):            # empty, malformed, identity
        bad = dataclasses.replace(offer, certification=Certification(cert.height, cert.root, signature))
        assert isinstance(refusal(bad), ss.BadCertification)
    assert isinstance(refusal(offer, key=subnet_key(BETA)), ss.BadCertification)   # another subnet's key
    assert isinstance(refusal(offer, key=b"\x00" * 48), ss.BadCertification)       # not a key at all
    assert refusal(offer, key=subnet_key(BETA)).reason == "bad_certification"


def test_a_state_of_another_subnet_certified_by_it_is_refused():
    beta = certified_offer(BETA)
    assert verify(beta, subnet_key(BETA), subnet=BETA).own_subnet_id == BETA
    assert isinstance(refusal(beta, key=subnet_key(BETA)), ss.WrongSubnet)
    assert isinstance(refusal(beta), ss.BadCertification)      # alpha's key: its signature does not verify


# -- offers from checkpoints on disk --------------------------------------------------------------

def test_an_offer_is_made_from_a_checkpoint_directory(tmp_path):
    s = make_state()
    trees = build_state_trees(s)
    store = CheckpointStore(tmp_path / "checkpoints", interval=HEIGHT)
    directory = store.write(HEIGHT, s, trees.full_hash)
    certification = certify(ALPHA, HEIGHT, trees.certified_root)
    offer = ss.offer_from_checkpoint(store, HEIGHT, block_hash=BLOCK_HASH, certification=certification)
    assert offer == ss.offer_from_checkpoint_dir(directory, block_hash=BLOCK_HASH, certification=certification)
    assert offer.state_bytes == (directory / "state.bin").read_bytes()
    assert (offer.height, offer.block_hash) == (HEIGHT, BLOCK_HASH)
    assert verify(ss.decode_offer(ss.encode_offer(offer))).metadata.batch_number == HEIGHT

    with pytest.raises(ss.StateSyncError, match="height"):
        ss.offer_from_checkpoint(store, HEIGHT, block_hash=BLOCK_HASH, certification=certify(ALPHA, 1, trees.certified_root))
    with pytest.raises(ss.StateSyncError):
        ss.offer_from_checkpoint(store, HEIGHT, block_hash=b"short", certification=certification)
    with pytest.raises(CorruptCheckpoint):
        ss.offer_from_checkpoint(store, HEIGHT + 1, block_hash=BLOCK_HASH, certification=certification)
    with pytest.raises(CorruptCheckpoint):
        ss.offer_from_checkpoint_dir(tmp_path, block_hash=BLOCK_HASH, certification=certification)
    data = (directory / "state.bin").read_bytes()
    (directory / "state.bin").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(CorruptCheckpoint, match="digest"):
        ss.offer_from_checkpoint(store, HEIGHT, block_hash=BLOCK_HASH, certification=certification)
    (directory / "manifest.bin").write_bytes(b"\x00")
    with pytest.raises(CorruptCheckpoint, match="manifest"):
        ss.offer_from_checkpoint(store, HEIGHT, block_hash=BLOCK_HASH, certification=certification)


def test_fetch_requests():
    assert ss.check_fetch_request(b"") == ss.check_fetch_request(ss.encode_fetch_request()) == ss.FETCH_REQUEST_VERSION
    for bad in (encode(2), encode("1"), b"\xcc\x01", b"\x01\x01", b"\x00" * 100, encode(True)):
        with pytest.raises(ss.MalformedFetchRequest):
            ss.check_fetch_request(bad)


# -- FetchCheckpoint over gRPC ---------------------------------------------------------------------

def alpha_certificates() -> dict[str, bytes]:
    return {n.node_id: n.certificate_pem for n in dealt()[0].record(1).nodes_of(ALPHA)}


@pytest.fixture
def serving():
    """Node 1 of alpha serving what ``serving.answer()`` returns; ``serving.client(identity)``."""
    registry, secrets = dealt()
    certificates = alpha_certificates()
    server_id = f"{ALPHA}-node-1"

    class Serving:
        def __init__(self) -> None:
            self.answer = lambda: None
            self.clients: list[AgreementClient] = []

        def client(self, identity) -> AgreementClient:
            client = AgreementClient(identity, lambda: {server_id: self.address})
            self.clients.append(client)
            return client

    serving = Serving()
    server = AgreementServer(secrets[server_id].identity, certificates, lambda sender, m: None,
                             serve_checkpoint=lambda: serving.answer())
    port = server.start()
    serving.address = PeerAddress(server_id, f"127.0.0.1:{port}", certificates[server_id])
    serving.server_id, serving.port = server_id, port
    try:
        yield serving
    finally:
        for client in serving.clients:
            client.close()
        server.stop(0)


def test_a_peer_fetches_an_offer_over_grpc_and_verifies_it(serving):
    _, secrets = dealt()
    data = ss.encode_offer(good_offer())
    serving.answer = lambda: data
    client = serving.client(secrets[f"{ALPHA}-node-2"].identity)
    fetched = client.fetch_checkpoint(serving.server_id, timeout_s=10)
    assert fetched == data
    assert verify(ss.decode_offer(fetched)).metadata.batch_number == HEIGHT


def test_offers_larger_than_grpcs_default_limit_arrive(serving):
    _, secrets = dealt()
    big = bytes(range(256)) * (24 * 4096)   # 24 MiB: far above gRPC's default 4 MiB
    serving.answer = lambda: big
    assert serving.client(secrets[f"{ALPHA}-node-3"].identity).fetch_checkpoint(serving.server_id, 30) == big


def test_nothing_to_serve_is_not_found(serving):
    _, secrets = dealt()
    client = serving.client(secrets[f"{ALPHA}-node-2"].identity)
    with pytest.raises(NoCheckpoint) as missing:
        client.fetch_checkpoint(serving.server_id, timeout_s=10)
    assert missing.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(CheckpointFetchError) as unknown:
        client.fetch_checkpoint("nobody", timeout_s=1)
    assert unknown.value.code is None

    def broken():
        raise RuntimeError("disk gone")

    serving.answer = broken
    with pytest.raises(CheckpointFetchError) as internal:
        client.fetch_checkpoint(serving.server_id, timeout_s=10)
    assert internal.value.code == grpc.StatusCode.INTERNAL and "disk" not in str(internal.value)
    client.close()
    with pytest.raises(CheckpointFetchError, match="closed"):
        client.fetch_checkpoint(serving.server_id, timeout_s=1)


def test_clients_the_server_does_not_list_are_refused(serving):
    _, secrets = dealt()
    served = []
    serving.answer = lambda: served.append(1) or b"offer"
    for identity in (generate_node_identity("mallory", NOT_BEFORE), secrets[f"{BETA}-node-1"].identity):
        with pytest.raises(CheckpointFetchError) as refused:
            serving.client(identity).fetch_checkpoint(serving.server_id, timeout_s=10)
        assert refused.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.PERMISSION_DENIED)
    assert served == []


def test_a_bad_request_body_is_invalid_argument(serving):
    _, secrets = dealt()
    serving.answer = lambda: b"offer"
    identity = secrets[f"{ALPHA}-node-2"].identity
    pem = serving.address.certificate_pem
    credentials = grpc.ssl_channel_credentials(root_certificates=pem, private_key=identity.private_key_pem(),
                                               certificate_chain=identity.certificate_pem())
    with grpc.secure_channel(f"127.0.0.1:{serving.port}", credentials,
                             options=[("grpc.ssl_target_name_override", tls_target_name(pem))]) as channel:
        call = channel.unary_unary(FETCH_CHECKPOINT_METHOD)
        assert call(b"", timeout=10) == b"offer"                 # an empty request is version 1
        with pytest.raises(grpc.RpcError) as bad:
            call(encode(9), timeout=10)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_second_fetch_while_one_is_served_is_turned_away(serving):
    _, secrets = dealt()
    entered, release = threading.Event(), threading.Event()

    def slow():
        entered.set()
        release.wait(10)
        return b"offer"

    serving.answer = slow
    first_client = serving.client(secrets[f"{ALPHA}-node-2"].identity)
    result: list = []
    first = threading.Thread(target=lambda: result.append(first_client.fetch_checkpoint(serving.server_id, 20)))
    first.start()
    try:
        assert entered.wait(10)
        with pytest.raises(CheckpointFetchError) as busy:
            serving.client(secrets[f"{ALPHA}-node-3"].identity).fetch_checkpoint(serving.server_id, timeout_s=10)
        assert busy.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        release.set()
        first.join(20)
    assert result == [b"offer"]
