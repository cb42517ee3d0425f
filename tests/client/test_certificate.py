"""The agent's certificate verification (pure): ``verify_answer_certificate`` on IC certificates
as nodes answer them (``replica.node.read_state.certificate_for``), with and without the root
subnet's delegation (``replica.node.delegation.delegation_of``). An honest certificate verifies
and answers lookups; each failed check raises its own ``CertificateInvalid`` subclass; no
single-byte change of an honest answer is accepted; the ``SignatureCache`` spares the pairings
of a certificate already verified, and nothing else."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica.client.agent_errors import (
    CertificateHeightMismatch, CertificateInvalid, CertificateSignatureInvalid, CertificateTooOld,
    CertificationRollback, MalformedCertificate, PathNotProven,
)
from replica.client.certificate import SignatureCache, VerifiedCertificate, verify_answer_certificate
from replica.ic import bls as ic_bls
from replica.ic import cbor
from replica.ic.certificate import (
    Certificate, CertificateDelegation, decode_certificate, encode_certificate, state_root_message,
)
from replica.ic.principal import Principal, canister_principal
from replica.node.delegation import delegation_of
from replica.node.read_state import certificate_for
from state_manager import bls
from state_manager.certification import Certification, aggregate_certification, sign_certification_share
from state_manager.hash_tree import fork, labeled, leaf as tree_leaf, reconstruct
from state_manager.ic_encoding import (
    canister_principal_bytes, encode_canister_ranges, shard_canister_ranges, subnet_principal_bytes, uleb128,
)
from state_manager.labeled_trie import LabeledTrie, build_from_sorted
from state_manager.state_tree import leaf
from state_manager.trie_witness import plan_paths, witness_tree

SECOND = 10**9
NOW = 1_700_000_000 * SECOND
MAX_AGE = 300 * SECOND
HEIGHT = 7
HEIGHT_PATH = [b"metadata", b"height"]   # every answer reveals it: it authenticates the height
MID = bytes(range(32))
ROOT = bls.deal_threshold_keys(1, 1, b"\x31" * 32)      # the root subnet's key: the agent's root key
SUBNET = bls.deal_threshold_keys(1, 1, b"\x32" * 32)    # the subnet the answers are of
OTHER = bls.deal_threshold_keys(1, 1, b"\x33" * 32)     # another subnet
ROOT_ID, SUBNET_ID, OTHER_ID = (subnet_principal_bytes(k.public_key) for k in (ROOT, SUBNET, OTHER))
#: The subnet's canisters: 100 ..= 199.
RANGES = ((canister_principal_bytes(100), canister_principal_bytes(199)),)
IN_RANGE = canister_principal(150)


def certify(trie: LabeledTrie, keys: bls.ThresholdKeys, height: int = HEIGHT) -> Certification:
    share = sign_certification_share(height, trie.digest(), 1, keys.secret_share(1))
    return aggregate_certification([share], 1, keys.public_key, {1: keys.public_key_share(1)})


def subnet_trie(*, time_ns: int = NOW, height: int = HEIGHT, reply: bytes = b"DIDL\x00\x00",
                metadata: bool = True) -> LabeledTrie:
    """A subnet's certified tree in the IC layout: ``MID`` replied, ``/time`` LEB128."""
    items = [(b"request_status", build_from_sorted([
                 (MID, build_from_sorted([(b"reject_code", uleb128(4)), (b"reply", reply), (b"status", b"replied")]))])),
             (b"time", uleb128(time_ns))]
    if metadata:
        items.insert(0, (b"metadata", build_from_sorted([(b"height", leaf(height))])))
    return build_from_sorted(items)


def root_trie(subnet: bytes = SUBNET_ID, key: bytes = SUBNET.public_key, ranges=RANGES, *, flat: bool = True,
              sharded: bool = True, time_ns: int = NOW - 10 * SECOND) -> LabeledTrie:
    """The root subnet's certified tree stating ``subnet``'s key and ranges (in either layout or both)."""
    entry = [(b"public_key", bls.public_key_der(key))]
    if flat:
        entry.insert(0, (b"canister_ranges", encode_canister_ranges(ranges)))
    items = [(b"metadata", build_from_sorted([(b"height", leaf(40))])),
             (b"subnet", build_from_sorted([(subnet, build_from_sorted(entry))])),
             (b"time", uleb128(time_ns))]
    if sharded:
        items.insert(0, (b"canister_ranges", build_from_sorted([
            (subnet, build_from_sorted(shard_canister_ranges(ranges).items()))])))
    return build_from_sorted(items)


def delegation(trie: LabeledTrie | None = None, *, keys: bls.ThresholdKeys = ROOT,
               subnet: bytes = SUBNET_ID) -> CertificateDelegation:
    """The root subnet's delegation to ``subnet``, as a node fetches it (signed by ``keys``)."""
    trie = root_trie() if trie is None else trie
    return delegation_of(trie, certify(trie, keys, 40), subnet)


DELEGATION = delegation()


def answer(paths=([b"request_status", MID],), trie: LabeledTrie | None = None, *, keys=SUBNET,
           delegated: CertificateDelegation | None = DELEGATION, height: int = HEIGHT) -> bytes:
    """What a node of the subnet answers a read_state of ``paths`` with."""
    trie = subnet_trie(height=height) if trie is None else trie
    return certificate_for(trie, certify(trie, keys, height), [list(p) for p in paths], delegated)


def witness(trie: LabeledTrie, paths, *, keys=SUBNET, delegated: CertificateDelegation | None = DELEGATION) -> bytes:
    """A certificate revealing exactly ``paths`` (no ``/time`` or height added)."""
    tree = witness_tree(trie, plan_paths([list(p) for p in paths]))
    return encode_certificate(Certificate(tree, certify(trie, keys).signature, delegated))


def check(data: bytes, *, subnet_id: str = "alpha", principal: bytes = SUBNET_ID, is_root: bool = False,
          subnet_key: bytes = SUBNET.public_key, canister: Principal | None = IN_RANGE, now: int = NOW,
          min_height: int = 0, cache: SignatureCache | None = None) -> VerifiedCertificate:
    return verify_answer_certificate(
        data, subnet_id=subnet_id, subnet_principal=principal, is_root=is_root, root_key=ROOT.public_key,
        subnet_key=subnet_key, canister=canister, now_ns=now, max_age_ns=MAX_AGE, min_height=min_height,
        cache=SignatureCache() if cache is None else cache)


def check_root(data: bytes, **options) -> VerifiedCertificate:
    """As for an answer of the root subnet (its certificates carry no delegation)."""
    return check(data, subnet_id="root", principal=ROOT_ID, is_root=True, subnet_key=ROOT.public_key, **options)


# -- honest certificates ------------------------------------------------------------------------

def _assert_lookups(verified: VerifiedCertificate, subnet_id: str) -> None:
    assert (verified.height, verified.time_ns, verified.subnet_id) == (HEIGHT, NOW, subnet_id)
    assert verified.lookup_value([b"request_status", MID, b"status"]) == "replied"
    assert verified.lookup_value([b"request_status", MID, b"reply"]) == b"DIDL\x00\x00"
    assert verified.lookup_value([b"request_status", MID, b"reject_code"]) == 4          # LEB128
    assert verified.lookup_value([b"request_status", bytes(32), b"status"]) is None     # proven absent
    assert verified.lookup_value([b"time"]) == NOW
    assert verified.lookup_value(HEIGHT_PATH) == HEIGHT


def test_a_certificate_with_the_root_subnets_delegation_verifies_and_answers_lookups():
    data = answer()
    assert decode_certificate(data).delegation == DELEGATION
    # the delegation is what is trusted: the subnet key of the registry plays no part
    _assert_lookups(check(data, subnet_key=OTHER.public_key), "alpha")


@pytest.mark.parametrize("layout", [{"flat": True, "sharded": False}, {"flat": False, "sharded": True}])
def test_a_delegation_in_either_ranges_layout_covers_the_canister(layout):
    data = answer(delegated=delegation(root_trie(**layout)))
    for edge in (100, 150, 199):
        assert check(data, canister=canister_principal(edge)).height == HEIGHT


def test_a_root_subnet_certificate_verifies_under_the_root_key_without_delegation():
    _assert_lookups(check_root(answer(keys=ROOT, delegated=None)), "root")


def test_a_subnet_certificate_without_delegation_verifies_under_the_registrys_key():
    """A node that serves no delegation is still checked against a key the agent trusts."""
    data = answer(delegated=None)
    _assert_lookups(check(data), "alpha")
    with pytest.raises(CertificateSignatureInvalid):
        check(data, subnet_key=OTHER.public_key)
    with pytest.raises(CertificateSignatureInvalid):   # not the root subnet's either
        check(data, is_root=True)


def test_lookups_of_pruned_paths_are_not_proven():
    verified = check(answer(paths=()))
    for path in ([b"request_status", MID, b"status"], [b"request_status", MID, b"reply"], [b"request_status", MID]):
        with pytest.raises(PathNotProven):
            verified.lookup(path)
        with pytest.raises(PathNotProven):
            verified.lookup_value(path)
    with pytest.raises(MalformedCertificate, match="subtree"):   # revealed, but not a leaf
        check(answer()).lookup([b"request_status", MID])


# -- refusals -------------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [
    b"", b"\x00", b"garbage", cbor.encode([1, 2]), cbor.encode({"tree": [0]}),
    cbor.encode({"tree": [0], "signature": b"", "extra": 1}),
    cbor.encode({"tree": [9], "signature": b""}),
    cbor.encode({"tree": [0], "signature": b"", "delegation": {"subnet_id": SUBNET_ID}}),
])
def test_bytes_that_are_no_certificate_are_malformed(data):
    with pytest.raises(MalformedCertificate):
        check(data)


def test_a_malformed_delegation_or_tree_is_malformed():
    honest = decode_certificate(answer())
    for inner in (b"", b"garbage", cbor.encode({"tree": [0]})):
        forged = Certificate(honest.tree, honest.signature, CertificateDelegation(SUBNET_ID, inner))
        with pytest.raises(MalformedCertificate):
            check(encode_certificate(forged))
    nested = delegation_of(root_trie(), certify(root_trie(), ROOT, 40), SUBNET_ID)
    inner = decode_certificate(nested.certificate)
    nested_inner = encode_certificate(Certificate(inner.tree, inner.signature, DELEGATION))
    with pytest.raises(MalformedCertificate, match="carries a delegation"):
        check(encode_certificate(Certificate(honest.tree, honest.signature,
                                             CertificateDelegation(SUBNET_ID, nested_inner))))
    unsorted = fork(labeled(b"time", tree_leaf(uleb128(NOW))), labeled(b"a", tree_leaf(b"")))
    signature = bls.sign(SUBNET.secret_share(1), state_root_message(reconstruct(unsorted)))
    with pytest.raises(MalformedCertificate, match="well formed"):
        check(encode_certificate(Certificate(unsorted, signature, None)), canister=None)


def test_a_delegation_that_states_no_key_for_the_subnet_is_malformed():
    other_only = delegation(root_trie(subnet=OTHER_ID, key=OTHER.public_key), subnet=SUBNET_ID)
    with pytest.raises(MalformedCertificate, match="key"):
        check(answer(delegated=other_only))


def test_signatures_under_another_key_are_refused():
    with pytest.raises(CertificateSignatureInvalid):   # the root subnet's answer signed by another key
        check_root(answer(keys=OTHER, delegated=None))
    with pytest.raises(CertificateSignatureInvalid):   # a delegation the root key did not sign
        check(answer(delegated=delegation(keys=OTHER)))
    with pytest.raises(CertificateSignatureInvalid):   # signed by a key other than the delegated one
        check(answer(keys=OTHER))
    with pytest.raises(CertificateSignatureInvalid):   # a delegation stating another key for the subnet
        check(answer(delegated=delegation(root_trie(key=OTHER.public_key))))
    honest = decode_certificate(answer())
    with pytest.raises(CertificateSignatureInvalid):   # signature bytes that are no signature
        check(encode_certificate(Certificate(honest.tree, b"\x00" * 48, honest.delegation)))


def test_a_tree_other_than_the_signed_one_is_refused():
    honest = decode_certificate(answer())
    forged = decode_certificate(answer(trie=subnet_trie(reply=b"DIDL\x00\x01")))
    with pytest.raises(CertificateSignatureInvalid):
        check(encode_certificate(Certificate(forged.tree, honest.signature, honest.delegation)))


def test_a_delegation_to_another_subnet_is_refused():
    """Another subnet's node, with its own valid delegation, answering for this subnet."""
    to_other = delegation(root_trie(subnet=OTHER_ID, key=OTHER.public_key), subnet=OTHER_ID)
    assert check(answer(keys=OTHER, delegated=to_other), subnet_id="other", principal=OTHER_ID,
                 canister=None).height == HEIGHT   # an honest answer of the other subnet
    with pytest.raises(MalformedCertificate, match="delegation to"):
        check(answer(keys=OTHER, delegated=to_other))


@pytest.mark.parametrize("canister", [0, 99, 200, 2**64 - 2])
def test_a_canister_outside_the_delegated_ranges_is_refused(canister):
    with pytest.raises(CertificateSignatureInvalid, match="may not certify for canister"):
        check(answer(), canister=canister_principal(canister))


def test_a_delegation_without_the_subnets_ranges_covers_no_canister():
    no_ranges = delegation(root_trie(flat=False, sharded=False))
    with pytest.raises(CertificateSignatureInvalid):
        check(answer(delegated=no_ranges))
    # the management canister (None): the subnet was chosen by the agent, no range is asked
    assert check(answer(delegated=no_ranges), canister=None).height == HEIGHT


def test_a_height_below_one_already_verified_is_a_rollback():
    assert check(answer(), min_height=HEIGHT).height == HEIGHT
    with pytest.raises(CertificationRollback):
        check(answer(), min_height=HEIGHT + 1)


def test_a_certificate_that_does_not_reveal_its_height_is_refused():
    trie = subnet_trie()
    with pytest.raises(CertificateHeightMismatch, match="/metadata/height"):   # pruned
        check(witness(trie, [[b"time"], [b"request_status", MID]]))
    heightless = subnet_trie(metadata=False)
    with pytest.raises(CertificateHeightMismatch, match="/metadata/height"):   # proven absent
        check(answer(trie=heightless))
    textual = build_from_sorted([(b"metadata", build_from_sorted([(b"height", leaf("7"))])),
                                 (b"time", uleb128(NOW))])
    with pytest.raises(CertificateHeightMismatch):                            # not a number
        check(answer(trie=textual))
    garbled = build_from_sorted([(b"metadata", build_from_sorted([(b"height", b"\xc1")])), (b"time", uleb128(NOW))])
    with pytest.raises(MalformedCertificate):                                 # not the project's leaf
        check(answer(trie=garbled))


def test_a_stale_certificate_is_too_old():
    assert check(answer(), now=NOW + MAX_AGE).time_ns == NOW
    with pytest.raises(CertificateTooOld):
        check(answer(), now=NOW + MAX_AGE + 1)


def test_time_must_be_revealed_and_a_leb128_number():
    trie = subnet_trie()
    with pytest.raises((MalformedCertificate, PathNotProven), match="/time"):
        check(witness(trie, [HEIGHT_PATH]))
    odd = build_from_sorted([(b"metadata", build_from_sorted([(b"height", leaf(HEIGHT))])),
                             (b"time", b"\x92\x82")])   # not one LEB128 number (the last byte continues)
    with pytest.raises(MalformedCertificate):
        check(answer(trie=odd))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), delegated=st.booleans())
def test_no_single_byte_change_is_accepted(data, delegated):
    honest = answer() if delegated else answer(delegated=None)
    encoded = bytearray(honest)
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] = data.draw(st.integers(0, 255).filter(lambda b: b != encoded[position]))
    with pytest.raises(CertificateInvalid):
        check(bytes(encoded))


# -- the signature cache --------------------------------------------------------------------------

@pytest.fixture
def pairings(monkeypatch):
    """How many pairing checks (BLS verifications) certificates cost."""
    counted = []
    verify = ic_bls.verify

    def counting(*args, **kwargs):
        counted.append(1)
        return verify(*args, **kwargs)

    monkeypatch.setattr(ic_bls, "verify", counting)
    return counted


def test_the_cache_spares_the_pairings_of_a_certificate_verified_before(pairings):
    cache = SignatureCache()
    data = answer()
    check(data, cache=cache)
    assert len(pairings) == 2                 # the delegation and the certificate
    assert check(data, cache=cache).height == HEIGHT
    assert len(pairings) == 2                 # the same certificate: no pairing
    other_witness = answer(paths=[[b"request_status", bytes(32)]])   # the same certification, other paths
    assert check(other_witness, cache=cache).lookup([b"request_status", bytes(32), b"status"]) is None
    assert len(pairings) == 2
    later = answer(trie=subnet_trie(time_ns=NOW + 1, height=HEIGHT + 1), height=HEIGHT + 1)
    assert check(later, cache=cache).height == HEIGHT + 1
    assert len(pairings) == 3                 # a new certification, the delegation known
    fresh = SignatureCache()
    check(data, cache=fresh)
    assert len(pairings) == 5                 # another cache knows nothing


def test_a_cached_certificate_is_still_checked_for_everything_but_its_signature():
    cache = SignatureCache()
    data = answer()
    check(data, cache=cache)
    with pytest.raises(CertificateSignatureInvalid):      # the canister's range, per canister
        check(data, cache=cache, canister=canister_principal(200))
    with pytest.raises(CertificationRollback):
        check(data, cache=cache, min_height=HEIGHT + 1)
    with pytest.raises(CertificateTooOld):
        check(data, cache=cache, now=NOW + MAX_AGE + 1)
    with pytest.raises(MalformedCertificate, match="delegation to"):
        check(data, cache=cache, principal=OTHER_ID)
    with pytest.raises(PathNotProven, match="/time"):     # the same certification, /time pruned
        check(witness(subnet_trie(), [HEIGHT_PATH]), cache=cache)


def test_a_failed_certificate_is_not_remembered(pairings):
    cache = SignatureCache()
    bad = answer(keys=OTHER)
    for _ in range(2):
        with pytest.raises(CertificateSignatureInvalid):
            check(bad, cache=cache)
    assert not cache.signatures
    assert len(pairings) == 3                 # the (valid) delegation once, the certificate at each attempt


def test_a_certificate_verified_under_one_subnets_key_is_not_another_subnets():
    """Without a delegation the trusted key is the subnet's in the registry: a certificate of
    subnet alpha, verified and cached, is no certificate of subnet beta (the cache is keyed by
    the key it was verified under too)."""
    cache = SignatureCache()
    data = answer(delegated=None)
    check(data, cache=cache)
    with pytest.raises(CertificateSignatureInvalid):
        check(data, cache=cache, subnet_id="beta", principal=OTHER_ID, subnet_key=OTHER.public_key)
    with pytest.raises(CertificateSignatureInvalid):
        check(data, cache=cache, is_root=True)


def test_a_cached_certificate_verifies_after_the_delegations_were_forgotten():
    """The cache forgets delegations when it holds many (a fetcher renews its delegation every
    few seconds); a certificate still remembered must then be verified again, not fail."""
    cache = SignatureCache()
    last = None
    for n in range(70):   # renewed delegations, one a height: the cache forgets the delegations it holds
        renewed = delegation(root_trie(time_ns=NOW - n * SECOND))
        last = answer(trie=subnet_trie(height=HEIGHT + n), delegated=renewed, height=HEIGHT + n)
        check(last, cache=cache)
        if len(cache.delegations) < n + 1:
            break
    assert not cache.delegations and len(cache.signatures) > 1
    assert check(last, cache=cache).height == HEIGHT + n   # the same answer polled again
    with pytest.raises(CertificateSignatureInvalid, match="may not certify for canister"):
        check(last, cache=cache, canister=canister_principal(200))
