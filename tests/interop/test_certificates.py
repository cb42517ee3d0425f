"""Certificates we build (``replica.ic.certificate``, trees in ``replica.ic``'s CBOR, threshold
signatures dealt by ``replica.ic.bls``) are verified by each client library's own certificate
code given our root key, and refused by it with one byte changed, under another root key, or
for a canister outside the delegated ranges.

Where the libraries differ from each other, the tests pin each one's behaviour, because the
server has to satisfy both:

* canister ranges: @dfinity/agent 3.4.3 reads only ``/subnet/<id>/canister_ranges`` (flat),
  icp-py-core 2.3.1 only ``/canister_ranges/<id>/<shard>`` (sharded): a delegation must
  carry both layouts;
* ``/time``: @dfinity/agent refuses an answer more than 5 minutes old or ahead and a delegation
  more than 30 days old; icp-py-core's certificate code checks no time, its agent checks the
  answer's ``/time`` within the ingress expiry (3 minutes) either way, the delegation's never.
"""

from __future__ import annotations

import pytest

from replica.ic.bls import SIGNATURE_BYTES
from replica.ic.certificate import decode_certificate, verify_certificate
from replica.ic.errors import IcFormatError

from .network import DAY_NS, IN_RANGE, MINUTE_NS, OTHER_ROOT, OUTSIDE, ROOT, delegated_certificate, now_ns, \
    root_certificate

LAYOUTS = {"flat": {"flat": True, "sharded": False}, "sharded": {"flat": False, "sharded": True},
           "both": {"flat": True, "sharded": True}}


def flipped(data: bytes, position: int) -> bytes:
    changed = bytearray(data)
    changed[position] ^= 0x01
    return bytes(changed)


def positions(data: bytes, count: int) -> list[int]:
    """``count`` byte positions spread over ``data``."""
    return sorted({(len(data) - 1) * i // (count - 1) for i in range(count)})


def lengthened_tails(certificate: bytes) -> set[int]:
    """The one change @dfinity/agent lets through: its CBOR decoder reads a byte string whose
    length runs past the end of the input as the bytes that are there, so lengthening the blob
    that ends a certificate (ours end with the signature, or with the delegation's certificate,
    which ends with its signature) changes nothing it reads. The positions of those length
    bytes, where the flip lengthens; our decoder refuses these changes too."""
    tails = [SIGNATURE_BYTES]
    delegation = decode_certificate(certificate).delegation
    if delegation is not None:
        tails.append(len(delegation.certificate))
    return {len(certificate) - size - 1 for size in tails if not certificate[len(certificate) - size - 1] & 1}


# -- @dfinity/agent: Certificate.create --------------------------------------------------------

def agent_js(js, *cases):
    """Each case ``(certificate, root_key_der, canister)`` through ``Certificate.create``."""
    payload = [{"certificate": cert.hex(), "root_key": root.hex(), "canister_id": str(canister)}
               for cert, root, canister in cases]
    return js("certificates.mjs", {"cases": payload}, timeout=60 + 2 * len(payload))["results"]


def refused(result: dict, code: str | None = None) -> bool:
    return not result["ok"] and (code is None or result["error"]["code"] == code)


def test_agent_js_verifies_our_certificates(js):
    now = now_ns()
    root, both, flat = root_certificate(now), delegated_certificate(now), delegated_certificate(now, **LAYOUTS["flat"])
    results = agent_js(js, (root, ROOT.der_key, IN_RANGE), (both, ROOT.der_key, IN_RANGE),
                       (flat, ROOT.der_key, IN_RANGE))
    assert [r["ok"] for r in results] == [True, True, True], results
    for certificate in (root, both, flat):   # and ours agrees
        verify_certificate(certificate, root_key=ROOT.keys.public_key, canister_id=IN_RANGE)


def test_agent_js_reads_only_the_flat_canister_ranges(js):
    [sharded] = agent_js(js, (delegated_certificate(now_ns(), **LAYOUTS["sharded"]), ROOT.der_key, IN_RANGE))
    assert refused(sharded, "LookupErrorCode") and "canister ranges" in sharded["error"]["message"]


def test_agent_js_refuses_a_canister_outside_the_delegated_ranges(js):
    now = now_ns()
    results = agent_js(js, *[(delegated_certificate(now, **LAYOUTS[layout]), ROOT.der_key, OUTSIDE)
                             for layout in ("flat", "both")])
    assert all(refused(r, "CertificateNotAuthorizedErrorCode") for r in results), results


def test_agent_js_refuses_another_root_key(js):
    now = now_ns()
    results = agent_js(js, (root_certificate(now), OTHER_ROOT.der_key, IN_RANGE),
                       (delegated_certificate(now), OTHER_ROOT.der_key, IN_RANGE))
    assert all(refused(r, "CertificateVerificationErrorCode") for r in results), results


def test_agent_js_refuses_every_changed_byte_of_a_root_certificate(js):
    certificate = root_certificate(now_ns())
    results = agent_js(js, *[(flipped(certificate, p), ROOT.der_key, IN_RANGE) for p in range(len(certificate))])
    accepted = {p for p, r in enumerate(results) if r["ok"]}
    assert accepted == lengthened_tails(certificate), results


def test_agent_js_refuses_changed_bytes_of_a_delegated_certificate(js):
    certificate = delegated_certificate(now_ns())
    spread = positions(certificate, 64) + sorted(lengthened_tails(certificate))
    results = agent_js(js, *[(flipped(certificate, p), ROOT.der_key, IN_RANGE) for p in spread])
    accepted = {p for p, r in zip(spread, results) if r["ok"]}
    assert accepted == lengthened_tails(certificate), results


def test_agent_js_checks_the_time_of_the_answer_and_of_the_delegation(js):
    now = now_ns()
    results = agent_js(
        js,
        (root_certificate(now - 6 * MINUTE_NS), ROOT.der_key, IN_RANGE),
        (root_certificate(now + 6 * MINUTE_NS), ROOT.der_key, IN_RANGE),
        (root_certificate(now - 2 * MINUTE_NS), ROOT.der_key, IN_RANGE),   # margin for a slow machine
        (delegated_certificate(now, delegation_time_ns=now - 29 * DAY_NS), ROOT.der_key, IN_RANGE),
        (delegated_certificate(now, delegation_time_ns=now - 31 * DAY_NS), ROOT.der_key, IN_RANGE),
    )
    assert [r["ok"] for r in results] == [False, False, True, True, False], results
    assert all(refused(results[i], "CertificateTimeErrorCode") for i in (0, 1, 4))


# -- icp-py-core: Certificate.assert_certificate_valid ----------------------------------------

def test_icp_py_core_verifies_our_certificates(icp_certificates):
    icp_certificates.trust(ROOT.der_key)
    now = now_ns()
    for certificate in (root_certificate(now), delegated_certificate(now),
                        delegated_certificate(now, **LAYOUTS["sharded"])):
        icp_certificates.verify(certificate, str(IN_RANGE))
        assert icp_certificates.parse(certificate).lookup_time() == now


def test_icp_py_core_reads_only_the_sharded_canister_ranges(icp_certificates):
    from icp_core.errors import CertificateVerificationError
    icp_certificates.trust(ROOT.der_key)
    with pytest.raises(CertificateVerificationError, match="Missing canister_ranges"):
        icp_certificates.verify(delegated_certificate(now_ns(), **LAYOUTS["flat"]), str(IN_RANGE))


@pytest.mark.parametrize("layout", ["sharded", "both"])
def test_icp_py_core_refuses_a_canister_outside_the_delegated_ranges(icp_certificates, layout):
    from icp_core.errors import CertificateVerificationError
    icp_certificates.trust(ROOT.der_key)
    with pytest.raises(CertificateVerificationError, match="CertificateNotAuthorized"):
        icp_certificates.verify(delegated_certificate(now_ns(), **LAYOUTS[layout]), str(OUTSIDE))


def test_icp_py_core_refuses_another_root_key(icp_certificates):
    from icp_core.errors import CertificateVerificationError
    icp_certificates.trust(OTHER_ROOT.der_key)
    now = now_ns()
    for certificate in (root_certificate(now), delegated_certificate(now)):
        with pytest.raises(CertificateVerificationError):
            icp_certificates.verify(certificate, str(IN_RANGE))


def test_icp_py_core_trusts_the_mainnet_key_unless_told_otherwise(icp_certificates):
    """What an agent built with ``Agent(root_key=...)`` does: its certificate code still uses
    the module's mainnet key, so our testnet's answers fail verification."""
    from icp_core.errors import CertificateVerificationError
    with pytest.raises(CertificateVerificationError):
        icp_certificates.verify(root_certificate(now_ns()), str(IN_RANGE))


@pytest.mark.parametrize("kind", ["root", "delegated"])
def test_icp_py_core_refuses_every_changed_byte(icp_certificates, kind):
    icp_certificates.trust(ROOT.der_key)
    now = now_ns()
    certificate = root_certificate(now) if kind == "root" else delegated_certificate(now)
    accepted = []
    for position in range(len(certificate)):
        try:
            icp_certificates.verify(flipped(certificate, position), str(IN_RANGE))
        except Exception:   # noqa: BLE001 - any refusal counts; the library raises several kinds
            continue
        accepted.append(position)
    assert not accepted, f"accepted with the byte at {accepted} changed"


def test_icp_py_core_checks_the_answers_time_only(icp_certificates):
    icp_certificates.trust(ROOT.der_key)
    now, expiry_ns = now_ns(), 3 * MINUTE_NS   # the agent's default ingress expiry
    with pytest.raises(ValueError, match="CertificateOutdated"):
        icp_certificates.parse(root_certificate(now - 4 * MINUTE_NS)).verify_cert_timestamp(expiry_ns)
    with pytest.raises(ValueError, match="CertificateFromFuture"):
        icp_certificates.parse(root_certificate(now + 4 * MINUTE_NS)).verify_cert_timestamp(expiry_ns)
    year_old = delegated_certificate(now, delegation_time_ns=now - 365 * DAY_NS)
    icp_certificates.verify(year_old, str(IN_RANGE))
    icp_certificates.parse(year_old).verify_cert_timestamp(expiry_ns)


def test_our_verifier_accepts_every_layout_and_refuses_lengthened_tails():
    now = now_ns()
    for layout in LAYOUTS.values():
        verify_certificate(delegated_certificate(now, **layout), root_key=ROOT.keys.public_key, canister_id=IN_RANGE)
    for certificate in (root_certificate(now), delegated_certificate(now)):
        assert lengthened_tails(certificate)
        for position in lengthened_tails(certificate):
            with pytest.raises(IcFormatError):
                verify_certificate(flipped(certificate, position), root_key=ROOT.keys.public_key, canister_id=IN_RANGE)
