"""Query answers signed as the IC signs them: the signed map, node signatures, the CBOR body,
and every refusal typed (hostile bodies and signatures included)."""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.ic import cbor
from replica.ic.errors import (
    CborRefused, IcFormatError, MalformedPublicKey, MalformedQueryResponse, MalformedSignature, QueryResponseRefused,
    QueryResponseUnsigned, QuerySignatureInvalid, QuerySignerMismatch, QuerySignerUnknown, SigningKeyError,
    UnsupportedKeyScheme,
)
from replica.ic.identities import Ed25519Identity, Secp256k1Identity
from replica.ic.principal import node_principal
from replica.ic.query_response import (
    MAX_NODE_SIGNATURES, NodeSignature, QueryRejected, QueryReplied, QueryResponse, decode_query_response,
    encode_query_response, query_response_from_value, response_hash, sign_query_response, signed_map,
    verify_node_signature, verify_query_response,
)
from replica.ic.request_id import hash_of_map, uleb128

NODE = Ed25519Identity.from_seed(b"query-response node 1")
OTHER = Ed25519Identity.from_seed(b"query-response node 2")
REQUEST_ID = hashlib.sha256(b"a query's content").digest()
TIME = 1_700_000_000_123_456_789
REPLIED = QueryReplied(b"DIDL\x00\x01\x7d\x0c")
REJECTED = QueryRejected(4, "no such method", "IC0536")
LIMIT = 1 << 16


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _by_hand(fields: dict[str, bytes]) -> bytes:
    """``hash_of_map`` written out for fields whose value hashes are given: the specification's
    ``H(concat(sort([H(key) · hash(value)])))``, independent of ``replica.ic.request_id``."""
    return _h(b"".join(sorted(_h(k.encode()) + v for k, v in fields.items())))


def test_the_signed_maps_are_the_specifications():
    assert signed_map(REPLIED, TIME, REQUEST_ID) == {
        "status": "replied", "reply": {"arg": REPLIED.arg}, "timestamp": TIME, "request_id": REQUEST_ID}
    assert signed_map(REJECTED, TIME, REQUEST_ID) == {
        "status": "rejected", "reject_code": 4, "reject_message": "no such method", "error_code": "IC0536",
        "timestamp": TIME, "request_id": REQUEST_ID}
    # an absent error_code is absent from the signed map (as @dfinity/agent drops undefined fields)
    assert "error_code" not in signed_map(QueryRejected(5, "trapped"), TIME, REQUEST_ID)


def test_the_response_hash_matches_the_formula_computed_by_hand():
    replied = _by_hand({"status": _h(b"replied"), "reply": _by_hand({"arg": _h(REPLIED.arg)}),
                        "timestamp": _h(uleb128(TIME)), "request_id": _h(REQUEST_ID)})
    assert response_hash(REPLIED, TIME, REQUEST_ID) == replied
    rejected = _by_hand({"status": _h(b"rejected"), "reject_code": _h(b"\x04"), "reject_message": _h(b"no such method"),
                         "error_code": _h(b"IC0536"), "timestamp": _h(uleb128(TIME)), "request_id": _h(REQUEST_ID)})
    assert response_hash(REJECTED, TIME, REQUEST_ID) == rejected


@pytest.mark.parametrize("outcome", [REPLIED, REJECTED, QueryRejected(1, "")], ids=["replied", "rejected", "no code"])
def test_a_node_signature_verifies_with_cryptographys_ed25519(outcome):
    signature = sign_query_response(outcome, REQUEST_ID, TIME, NODE)
    assert signature.timestamp == TIME and signature.identity == node_principal(NODE.der_public_key)
    payload = b"\x0bic-response" + hash_of_map(signed_map(outcome, TIME, REQUEST_ID))
    Ed25519PublicKey.from_public_bytes(NODE.der_public_key[12:]).verify(signature.signature, payload)
    verify_node_signature(outcome, REQUEST_ID, signature, NODE.der_public_key)


def test_a_fixed_signature_is_pinned():
    """Ed25519 is deterministic: a fixed key, answer and time give these bytes every time (a
    change to the signed map or the separator would change them)."""
    signature = sign_query_response(REPLIED, REQUEST_ID, TIME, NODE)
    assert response_hash(REPLIED, TIME, REQUEST_ID).hex() == (
        "b94d494c3bc2becebb391eb63e3e7984908cde8bf74a4965943768d932383846")
    assert signature.signature.hex() == (
        "2289f9e203085c13f8a848cc91e2a59999984d10121dc37a692837c1c8ed983d"
        "4df52cff8f7dc3e0e10197b1cf83522e74d71b0104f8b135fd0d9d78f0f1f101")
    assert str(signature.identity) == "wghro-pliql-oichp-52jkm-j5j7g-s7gzw-q2ivh-ad3s5-velgg-2mdhe-rae"


def test_the_answer_round_trips_and_verifies_under_the_subnets_node_keys():
    response = QueryResponse(REJECTED, (sign_query_response(REJECTED, REQUEST_ID, TIME, NODE),
                                        sign_query_response(REJECTED, REQUEST_ID, TIME + 1, OTHER)))
    body = encode_query_response(response)
    assert body.startswith(cbor.SELF_DESCRIBE_PREFIX)
    assert decode_query_response(body, max_bytes=LIMIT) == response
    keys = {node_principal(i.der_public_key): i.der_public_key for i in (NODE, OTHER)}
    verify_query_response(response, REQUEST_ID, keys)
    value = cbor.decode(body, max_bytes=LIMIT)
    assert set(value) == {"status", "reject_code", "reject_message", "error_code", "signatures"}
    assert set(value["signatures"][0]) == {"timestamp", "signature", "identity"}


def test_signatures_that_do_not_authenticate_the_answer_are_refused_typed():
    signature = sign_query_response(REPLIED, REQUEST_ID, TIME, NODE)
    keys = {signature.identity: NODE.der_public_key}
    cases = [
        # another answer, another query, another time: the signature does not cover them
        (QueryResponse(QueryReplied(b"DIDL\x00\x01\x7d\x0d"), (signature,)), REQUEST_ID, keys, QuerySignatureInvalid),
        (QueryResponse(REPLIED, (signature,)), bytes(32), keys, QuerySignatureInvalid),
        (QueryResponse(REPLIED, (NodeSignature(TIME + 1, signature.signature, signature.identity),)), REQUEST_ID, keys,
         QuerySignatureInvalid),
        # a replied answer's signature does not sign a reject, nor a reject with another error code
        (QueryResponse(REJECTED, (sign_query_response(QueryRejected(4, "no such method"), REQUEST_ID, TIME, NODE),)),
         REQUEST_ID, keys, QuerySignatureInvalid),
        # a node not of the subnet, a node claiming another's key, none at all
        (QueryResponse(REPLIED, (signature,)), REQUEST_ID, {}, QuerySignerUnknown),
        (QueryResponse(REPLIED, (signature,)), REQUEST_ID, {signature.identity: OTHER.der_public_key},
         QuerySignerMismatch),
        (QueryResponse(REPLIED, ()), REQUEST_ID, keys, QueryResponseUnsigned),
    ]
    for response, rid, node_keys, error in cases:
        with pytest.raises(error):
            verify_query_response(response, rid, node_keys)
    with pytest.raises(MalformedSignature):
        verify_node_signature(REPLIED, REQUEST_ID, NodeSignature(TIME, b"\x00" * 63, signature.identity),
                              NODE.der_public_key)
    with pytest.raises(UnsupportedKeyScheme):
        verify_node_signature(REPLIED, REQUEST_ID, signature, Secp256k1Identity.from_seed(b"k").der_public_key)
    with pytest.raises(MalformedPublicKey):
        verify_node_signature(REPLIED, REQUEST_ID, signature, NODE.der_public_key[:-1])


def test_only_an_ed25519_identity_signs_query_answers():
    with pytest.raises(SigningKeyError):
        sign_query_response(REPLIED, REQUEST_ID, TIME, Secp256k1Identity.from_seed(b"not a node"))


@pytest.mark.parametrize("outcome, timestamp, rid", [
    (QueryRejected(0, "zero is no reject code"), TIME, REQUEST_ID),
    (QueryRejected(4, b"bytes"), TIME, REQUEST_ID),
    (QueryRejected(4, "m", 406), TIME, REQUEST_ID),
    (QueryReplied("text"), TIME, REQUEST_ID),
    (REPLIED, -1, REQUEST_ID),
    (REPLIED, 1 << 64, REQUEST_ID),
    (REPLIED, True, REQUEST_ID),
    (REPLIED, TIME, REQUEST_ID[:31]),
    ("replied", TIME, REQUEST_ID),
])
def test_the_signed_map_refuses_values_the_interface_does_not_allow(outcome, timestamp, rid):
    with pytest.raises(MalformedQueryResponse):
        signed_map(outcome, timestamp, rid)


def _value(response: QueryResponse) -> dict:
    return cbor.decode(encode_query_response(response), max_bytes=LIMIT)


def _body(value) -> bytes:
    return cbor.encode(value)


def test_malformed_bodies_are_refused_typed():
    good = _value(QueryResponse(REPLIED, (sign_query_response(REPLIED, REQUEST_ID, TIME, NODE),)))
    signature = good["signatures"][0]
    rejected = _value(QueryResponse(REJECTED, (sign_query_response(REJECTED, REQUEST_ID, TIME, NODE),)))
    cases = [
        ([good], MalformedQueryResponse),
        ({**good, "status": "processing"}, MalformedQueryResponse),
        ({**good, "extra": 1}, MalformedQueryResponse),
        ({k: v for k, v in good.items() if k != "signatures"}, MalformedQueryResponse),
        ({**good, "reply": {"arg": REPLIED.arg, "more": b""}}, MalformedQueryResponse),
        ({**good, "reply": {"arg": "text"}}, MalformedQueryResponse),
        ({**good, "reply": REPLIED.arg}, MalformedQueryResponse),
        ({**good, "reject_code": 4}, MalformedQueryResponse),
        ({**good, "signatures": []}, QueryResponseUnsigned),
        ({**good, "signatures": signature}, MalformedQueryResponse),
        ({**good, "signatures": [signature] * (MAX_NODE_SIGNATURES + 1)}, MalformedQueryResponse),
        ({**good, "signatures": [{**signature, "signature": signature["signature"][:63]}]}, MalformedQueryResponse),
        ({**good, "signatures": [{**signature, "identity": b"\x01" * 30}]}, MalformedQueryResponse),
        ({**good, "signatures": [{**signature, "identity": "aaaaa-aa"}]}, MalformedQueryResponse),
        ({**good, "signatures": [{**signature, "timestamp": -1}]}, MalformedQueryResponse),
        ({**good, "signatures": [{**signature, "timestamp": 1 << 64}]}, MalformedQueryResponse),
        ({**good, "signatures": [{**signature, "node": b""}]}, MalformedQueryResponse),
        ({k: v for k, v in rejected.items() if k != "reject_message"}, MalformedQueryResponse),
        ({**rejected, "reject_code": 0}, MalformedQueryResponse),
        ({**rejected, "reject_code": "4"}, MalformedQueryResponse),
        ({**rejected, "error_code": 536}, MalformedQueryResponse),
        ({**rejected, "reply": {"arg": b""}}, MalformedQueryResponse),
    ]
    for value, error in cases:
        with pytest.raises(error):
            decode_query_response(_body(value), max_bytes=LIMIT)
    # a reject without error_code is well-formed (the field is optional)
    plain = {k: v for k, v in rejected.items() if k != "error_code"}
    assert decode_query_response(_body(plain), max_bytes=LIMIT).outcome == QueryRejected(4, "no such method")
    # bytes that are no CBOR, or too many, or nested deeper than an answer
    body = encode_query_response(query_response_from_value(good))
    for bad in (body[:-1], body + b"\x00", b"", b"\xff"):
        with pytest.raises(CborRefused):
            decode_query_response(bad, max_bytes=LIMIT)
    with pytest.raises(CborRefused):
        decode_query_response(body, max_bytes=len(body) - 1)
    with pytest.raises(CborRefused):
        decode_query_response(_body({**good, "reply": {"arg": [[[b""]]]}}), max_bytes=LIMIT)


def test_an_answer_without_signatures_is_not_encoded():
    with pytest.raises(QueryResponseUnsigned):
        encode_query_response(QueryResponse(REPLIED, ()))


_cbor_values = st.recursive(
    st.one_of(st.integers(-(1 << 64), (1 << 64) - 1), st.binary(max_size=70), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["status", "reply", "arg", "signatures", "timestamp",
                                                             "signature", "identity", "reject_code", "reject_message",
                                                             "error_code", "x"]), inner, max_size=6)),
    max_leaves=20)


@given(_cbor_values)
@settings(max_examples=400, deadline=None)
def test_hostile_values_are_refused_typed_or_decode_to_what_they_encode(value):
    try:
        response = query_response_from_value(value)
    except QueryResponseRefused:
        return
    assert query_response_from_value(cbor.decode(encode_query_response(response), max_bytes=1 << 20)) == response


@given(st.binary(max_size=300))
@settings(max_examples=400, deadline=None)
def test_hostile_bytes_are_refused_typed(body):
    try:
        decode_query_response(body, max_bytes=LIMIT)
    except IcFormatError:
        pass


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_any_change_to_a_signed_answer_is_caught(data):
    """Flip any byte of a signed answer's body: it is refused typed, or decodes to an answer
    whose signature no longer verifies, or (a change the encoding does not see) to the same one."""
    response = QueryResponse(REJECTED, (sign_query_response(REJECTED, REQUEST_ID, TIME, NODE),))
    body = bytearray(encode_query_response(response))
    index = data.draw(st.integers(0, len(body) - 1))
    body[index] ^= data.draw(st.integers(1, 255))
    keys = {node_principal(NODE.der_public_key): NODE.der_public_key}
    try:
        tampered = decode_query_response(bytes(body), max_bytes=LIMIT)
        verify_query_response(tampered, REQUEST_ID, keys)
    except IcFormatError:
        return
    assert tampered == response
