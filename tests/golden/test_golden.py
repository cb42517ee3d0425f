"""Golden vectors per encoding version (issue 12, item 6).

Every versioned canonical encoding of the product is encoded from one fixed value
(``fixtures``) and compared with the bytes committed in ``vectors.json`` under
``(name, version)``, where ``version`` is the encoder's current version constant. So:

* an encoding that changes without a version bump fails ``test_encoding_unchanged``;
* a version bump without a recorded entry fails ``test_current_version_recorded``;
* every committed entry still decodes (or, for versions the decoder no longer accepts, is
  still refused), and the current ones decode to the fixed value and re-encode to the same
  bytes (``test_golden_bytes_decode``).

The tests only compare against the committed file; ``python -m tests.golden.record`` prints
or records the current values for a developer who bumps a version on purpose.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json

import pytest

from state_manager import certification as cm
from state_manager import certified_slice as cs
from state_manager.state_tree import StateTreeBuilder, build_state_trees

from . import fixtures as fx
from .vectors import RECORD_COMMAND, Vector, all_vectors, load_golden, load_scenario

VECTORS = {v.name: v for v in all_vectors()}
GOLDEN = load_golden()
BY_KEY = {(e["name"], e["version"]): e for e in GOLDEN}


def _bytes(entry: dict) -> bytes:
    return bytes.fromhex(entry["hex"])


def _describe(data: bytes) -> str:
    return f"{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}"


def _first_difference(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def changed_message(vector: Vector, golden: bytes, current: bytes) -> str:
    if vector.current_version() is None:
        head = (f"{vector.name} changed. It has no version of its own; it determines {vector.unversioned_note}. "
                f"If the change is intended, re-record it with `{RECORD_COMMAND}`")
    else:
        head = (f"encoding {vector.name} changed: bump {vector.version_name()} and record a new golden entry "
                f"(keep the old one if the decoder still accepts it) with `{RECORD_COMMAND}`")
    return (f"{head}\n  golden : {_describe(golden)}\n  current: {_describe(current)}\n"
            f"  first difference at byte {_first_difference(golden, current)}")


# -- the committed file ------------------------------------------------------------------------

def test_golden_file_is_consistent():
    keys = [(e["name"], e["version"]) for e in GOLDEN]
    assert len(keys) == len(set(keys)), "vectors.json lists a (name, version) twice"
    for entry in GOLDEN:
        data = _bytes(entry)
        assert len(data) == entry["length"], f"{entry['name']} v{entry['version']}: length does not match hex"
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], \
            f"{entry['name']} v{entry['version']}: sha256 does not match hex"
        assert entry["name"] in VECTORS, (
            f"vectors.json has an entry for {entry['name']!r}, which no vector produces any more "
            f"(a leaf path of the fixture state went away, or a vector was renamed): remove it on purpose")
        vector = VECTORS[entry["name"]]
        if entry["decodes"] and vector.version_of is not None:
            assert vector.version_of(data) == entry["version"], \
                f"{entry['name']}: the golden bytes carry version {vector.version_of(data)}, recorded as {entry['version']}"


# -- current encoders against the committed bytes ----------------------------------------------

@pytest.mark.parametrize("name", sorted(VECTORS))
def test_encoder_writes_its_version_constant(name: str):
    vector = VECTORS[name]
    if vector.version_constant is None or vector.version_of is None:
        pytest.skip("no public version constant, or no version field in the bytes")
    written = vector.version_of(vector.encode(vector.build()))
    assert written == vector.current_version(), \
        f"{name}: the encoder writes version {written} but {vector.version_constant} = {vector.current_version()}"


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_current_version_recorded(name: str):
    vector = VECTORS[name]
    version = vector.current_version()
    recorded = sorted((e["version"] for e in GOLDEN if e["name"] == name), key=lambda v: -1 if v is None else v)
    assert (name, version) in BY_KEY, (
        f"no golden entry for {name} at version {version} ({vector.version_name()}); recorded versions: {recorded}. "
        f"If you bumped the version on purpose, record the new entry with `{RECORD_COMMAND}` "
        f"(and keep the old one if the decoder still accepts it)")


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_encoding_unchanged(name: str):
    vector = VECTORS[name]
    entry = BY_KEY.get((name, vector.current_version()))
    if entry is None:
        pytest.fail(f"no golden entry for {name} at version {vector.current_version()}: "
                    f"see test_current_version_recorded")
    golden, current = _bytes(entry), vector.encode(vector.build())
    assert current == golden, changed_message(vector, golden, current)


@pytest.mark.parametrize("key", sorted(BY_KEY, key=lambda k: (k[0], -1 if k[1] is None else k[1])),
                         ids=lambda k: f"{k[0]}@v{k[1]}")
def test_golden_bytes_decode(key):
    name, version = key
    entry = BY_KEY[key]
    vector = VECTORS.get(name)
    if vector is None:
        pytest.fail(f"no vector named {name!r} (see test_golden_file_is_consistent)")
    if vector.decode is None:
        pytest.skip("a derived digest or an output format: nothing decodes it")
    data = _bytes(entry)
    if not entry["decodes"]:
        with pytest.raises(Exception) as refused:
            vector.decode(data)
        assert not isinstance(refused.value, AssertionError)
        return
    try:
        decoded = vector.decode(data)
    except Exception as exc:  # noqa: BLE001 - reported with the hint below
        pytest.fail(f"golden {name} version {version} no longer decodes ({type(exc).__name__}: {exc}). If the decoder "
                    f"dropped that version on purpose, set its \"decodes\" to false in tests/golden/vectors.json")
    if version != vector.current_version():
        return   # an older version the decoder still accepts: decoding is all it owes
    assert vector.expect(decoded, vector.build()), f"golden {name} decodes to {decoded!r}, not the fixed value"
    reencode = vector.reencoder()
    if reencode is not None:
        assert reencode(decoded) == data, f"golden {name} does not re-encode to the same bytes"


def test_spec_example_root_is_the_design_value():
    """The interface specification fixes this root; re-recording must not move it."""
    assert BY_KEY[("hash tree root (spec example tree)", None)]["hex"] == \
        "eb5c5b2195e62d996b84c9bcc8259d19a83786a2f59e0878cec84c811f669aa0"


# -- the certified slice -----------------------------------------------------------------------

def test_certified_slice_decodes_and_verifies():
    entry = BY_KEY[("certified stream slice", cs.SLICE_VERSION)]
    data = _bytes(entry)
    assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["length"], entry["sha256"])
    decoded = cs.decode_certified_stream_slice(fx.B, fx.A, fx.public_key_for, fx.REGISTRY_VERSION, data)
    assert decoded.stream_slice == fx.SLICE_STREAM
    assert (decoded.witness_begin, decoded.witness_end) == (3, 6)
    certification = decoded.certification
    assert (certification.height, certification.root) == (fx.HEIGHT, fx.trees().certified_root)
    assert certification.root == bytes.fromhex(BY_KEY[("fixture certified root", None)]["hex"])
    cm.verify_certification(certification, fx.deal(fx.A).public_key)
    # The signature is really checked: under B's key the same bytes are refused.
    with pytest.raises(cs.SliceDecodeError):
        cs.decode_certified_stream_slice(fx.B, fx.A, lambda subnet, version: fx.deal(fx.B).public_key,
                                         fx.REGISTRY_VERSION, data)


def test_fixture_roots_agree_with_the_incremental_builder():
    """The pinned roots are the state manager's: from scratch and incrementally alike."""
    trees = StateTreeBuilder().update(fx.state())
    assert trees.certified_root == bytes.fromhex(BY_KEY[("fixture certified root", None)]["hex"])
    assert trees.full_hash == bytes.fromhex(BY_KEY[("fixture full state hash", None)]["hex"])


# -- state sync and agreement -------------------------------------------------------------------

def test_state_sync_offer_verifies_and_installs_the_fixture_state():
    """The golden offer is a real one: the subnet key verifies it and it carries the fixture state."""
    from replica.node import state_sync as sync

    data = _bytes(BY_KEY[("state sync offer (FetchCheckpoint response)", sync.OFFER_VERSION)])
    offer = sync.decode_offer(data)
    state = sync.verify_offer(offer, fx.deal(fx.A).public_key, expected_subnet=fx.A, min_height=fx.HEIGHT)
    assert state == fx.state()
    with pytest.raises(sync.BadCertification):   # and its signature is really checked
        sync.verify_offer(offer, fx.deal(fx.B).public_key, expected_subnet=fx.A, min_height=fx.HEIGHT)


def test_golden_catch_up_chains_from_genesis():
    """The catch-up vector carries the fixture chain: heights 1 and 2, linked by their hashes."""
    from consensus_stub.agreement.messages import MESSAGE_VERSION, decode_message
    from consensus_stub.block import GENESIS_PARENT_HASH, block_hash

    catch_up = decode_message(_bytes(BY_KEY[("agreement message (catch-up)", MESSAGE_VERSION)]))
    first, second = catch_up.blocks
    assert (first.parent_hash, second.parent_hash) == (GENESIS_PARENT_HASH, block_hash(first))


# -- the determinism scenario ------------------------------------------------------------------

SCENARIO_HINT = ("the state hashes of the determinism scenario changed. If an encoding changed on purpose, bump its "
                 f"VERSION and re-record with `{RECORD_COMMAND}`; otherwise behaviour changed (issue 12 requires "
                 "every state hash of this scenario to stay byte-identical)")


@pytest.fixture(scope="module")
def scenario_run():
    from tests.properties import determinism_scenario as scenario

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        scenario.main([])   # what `python -m tests.properties.determinism_scenario` prints
    return scenario, stdout.getvalue()


def test_determinism_scenario_final_hashes(scenario_run):
    _, printed = scenario_run
    summary = json.loads(printed)
    pinned = load_scenario()["subnets"]
    assert sorted(summary) == sorted(pinned)
    for subnet, expected in pinned.items():
        height, full, certified = summary[subnet]["hashes"][-1]
        assert (height, full, certified) == (expected["height"], expected["full_hash"], expected["certified_root"]), \
            f"{subnet}: {SCENARIO_HINT}"
        assert summary[subnet]["state_sha256"] == expected["state_sha256"], \
            f"{subnet}: the final state encoding changed: {SCENARIO_HINT}"


def test_determinism_scenario_summary_digest(scenario_run):
    _, printed = scenario_run
    assert printed.endswith("\n") and printed.count("\n") == 1
    assert hashlib.sha256(printed.encode()).hexdigest() == load_scenario()["summary_stdout_sha256"], SCENARIO_HINT


def test_determinism_scenario_final_states_rehash_to_the_pinned_roots(scenario_run):
    scenario, _ = scenario_run
    sim = scenario.record_run()
    for subnet, expected in load_scenario()["subnets"].items():
        trees = build_state_trees(sim.subnets[subnet].state)
        assert (trees.height, trees.full_hash.hex(), trees.certified_root.hex()) == \
            (expected["height"], expected["full_hash"], expected["certified_root"]), f"{subnet}: {SCENARIO_HINT}"


# -- the project's own BLS variant, before the IC's ----------------------------------------------

def test_committed_data_of_the_former_bls_variant_is_refused_with_typed_errors():
    """Certifications moved to the IC's BLS variant (docs/architecture.md, *Certifications*):
    what old files and peers hold in the former variant is refused, each with its typed
    error naming the old version — never accepted, never a crash."""
    from consensus_stub.agreement.messages import UnsupportedMessageVersion, decode_message
    from consensus_stub.registry import UnsupportedRegistryVersion, decode_registry
    from replica.node import state_sync as sync

    refusals = {
        ("certification", 2): (cm.decode_certification, cm.UnsupportedCertificationVersion),
        ("certification share", 2): (cm.decode_certification_share, cm.UnsupportedCertificationVersion),
        ("registry", 1): (decode_registry, UnsupportedRegistryVersion),
        ("certified stream slice", 1): (
            lambda data: cs.decode_certified_stream_slice(fx.B, fx.A, fx.public_key_for, fx.REGISTRY_VERSION, data),
            cs.UnsupportedSliceVersion),
        ("state sync offer (FetchCheckpoint response)", 1): (sync.decode_offer, sync.UnsupportedOfferVersion),
        ("agreement message (certification share)", 1): (decode_message, UnsupportedMessageVersion),
    }
    for key, (decode, error) in refusals.items():
        entry = BY_KEY[key]
        assert entry["decodes"] is False, key
        with pytest.raises(error, match="project's own BLS variant"):
            decode(_bytes(entry))


def test_committed_registry_and_secrets_without_node_signing_keys_are_refused_with_typed_errors():
    """Nodes got Ed25519 signing keys (registry version 3, node secrets version 2): the
    committed bytes of the versions before are refused, each naming what it lacks."""
    from consensus_stub.genesis import UnsupportedNodeSecretsVersion, decode_node_secrets
    from consensus_stub.registry import UnsupportedRegistryVersion, decode_registry

    refusals = {
        ("registry", 2): (decode_registry, UnsupportedRegistryVersion, "no node signing keys"),
        ("node secrets", 1): (decode_node_secrets, UnsupportedNodeSecretsVersion, "version 1"),
    }
    for key, (decode, error, match) in refusals.items():
        entry = BY_KEY[key]
        assert entry["decodes"] is False, key
        with pytest.raises(error, match=match):
            decode(_bytes(entry))


def test_the_golden_certification_share_message_proves_its_height():
    """A share's gossip carries the certified tree pruned to /metadata/height: it proves the
    fixture height under the fixture root (the signature covers the root only)."""
    from consensus_stub.agreement.messages import MESSAGE_VERSION, decode_message

    message = decode_message(_bytes(BY_KEY[("agreement message (certification share)", MESSAGE_VERSION)]))
    share = message.share
    assert (share.height, share.root) == (fx.HEIGHT, fx.trees().certified_root)
    cm.check_share_height(share)
    with pytest.raises(cm.CertifiedHeightMismatch):
        cm.check_share_height(cm.CertificationShare(fx.HEIGHT + 1, share.root, share.node_index,
                                                    share.signature_share, share.height_witness))


# -- the replica's own envelope, before the IC's --------------------------------------------------

def test_the_former_envelope_is_refused_with_a_typed_error_naming_it():
    """Requests are the IC's CBOR envelopes (envelope version 2, docs/architecture.md, *Formats and
    versions*): the committed version-1 envelope (the replica's msgpack array) is refused as such."""
    from replica.client.envelope import ENVELOPE_VERSION, decode_signed_ingress
    from replica.client.refusals import UnsupportedEnvelopeVersion

    assert ENVELOPE_VERSION == 2
    entry = BY_KEY[("ingress envelope", 1)]
    assert entry["decodes"] is False
    with pytest.raises(UnsupportedEnvelopeVersion, match="version-1"):
        decode_signed_ingress(_bytes(entry), 1 << 16, now_ns=fx.TIME)


def test_the_golden_envelopes_are_ic_envelopes():
    """Each current envelope is the IC's: CBOR behind the self-describe tag, its sender the
    self-authenticating principal of its key, and its message id the request id of its content."""
    from replica.ic import cbor
    from replica.ic.request_id import request_id

    assert BY_KEY[("ingress message id", 2)]["hex"] == request_id(fx.envelope_content()).hex()
    for name, key in (("ingress envelope", fx.user_key()), ("ingress envelope (secp256k1)", fx.secp256k1_user_key())):
        data = _bytes(BY_KEY[(name, 2)])
        value = cbor.decode(data, max_bytes=len(data))
        assert data.startswith(cbor.SELF_DESCRIBE_PREFIX) and set(value) == {"content", "sender_pubkey", "sender_sig"}
        assert value["sender_pubkey"] == key.der_public_key
        assert value["content"]["sender"] == hashlib.sha224(key.der_public_key).digest() + b"\x02"
        assert request_id(value["content"]) == request_id(fx.envelope_content(key))
