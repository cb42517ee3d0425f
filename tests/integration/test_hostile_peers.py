"""Hostile XNet peers: one node of beta serves bad slices; alpha must still make progress
through beta's honest nodes, and nothing may be inducted twice.

Each hostile behaviour is its own test. Traffic flows both ways (pings and ledger transfers
from alpha to beta and back), so beta's stream to alpha — the one the hostile node serves —
carries requests, responses and the signals that let alpha garbage-collect its stream.
"""

from __future__ import annotations

import datetime

import pytest

from consensus_stub.node_keys import generate_node_identity
from xnet.errors import PeerRejected, PeerUnavailable
from xnet.grpc.client import PeerEndpoint, XNetClient
from xnet.grpc.messages import GetStreamSliceRequest
from replica.inprocess.subnet import NodeHooks, Subnet
from tests.integration.harness import ALPHA, BETA, check_invariants, drive, make_testnet, run_to_settlement
from tests.integration.hostile import MODES, Forger, HostileProvider

pytestmark = pytest.mark.timeout(120)

HOSTILE = "beta-node-2"
WAVES = 8

#: How alpha's refreshers see each hostile behaviour: the refresher's error kind for the
#: hostile node, and (for slices that arrived) the node's refusal reasons, one of which must occur.
EXPECTED = {
    "forged_signature": ("RejectedSlice", {"InvalidCertificationSignature"}),
    "tampered_witness": ("RejectedSlice", {"RootMismatch", "PrunedDigestMismatch"}),
    "relabeled_height": ("RejectedSlice", {"CertificationHeightMismatch"}),
    "replay": ("RejectedSlice", {"FetchedSliceRejected"}),
    "gap": ("RejectedSlice", {"FetchedSliceRejected"}),
    "overlap": ("RejectedSlice", {"FetchedSliceRejected"}),
    "signals_regress": ("RejectedSlice", {"FetchedSliceRejected"}),
    "signals_beyond": ("RejectedSlice", {"FetchedSliceRejected"}),
    "oversized": ("ResponseTooLarge", set()),
    "garbage": ("RejectedSlice", {"MalformedSlice", "NonCanonicalSlice", "UnsupportedSliceVersion",
                                  "SliceFieldCount", "SliceTrailingBytes", "PayloadNotCanonical",
                                  "WitnessNotCanonical", "TreeTooDeep", "SliceTooLarge"}),
    "hang": ("PeerTimeout", set()),
}


def _errors(net, kind: str) -> int:
    return sum(node.refresher.error_counts_by_kind().get((HOSTILE, kind), 0)
               for node in net.subnets[ALPHA].nodes.values())


def _refusals(net) -> set[str]:
    return {reason for node in net.subnets[ALPHA].nodes.values() for (remote, reason) in node.rejected_slices
            if remote == BETA}


def _run_with_hostile(mode: str):
    hostile: dict[str, HostileProvider] = {}

    def wrap(inner):
        hostile["provider"] = HostileProvider(inner, mode)
        return hostile["provider"]

    net = make_testnet(hooks={HOSTILE: NodeHooks(serve_with=wrap)})
    provider = hostile["provider"]
    beta = net.current_registry.latest().subnet(BETA)
    provider.forger = Forger(beta, [s for s in net.secrets.values() if s.subnet_id == BETA])
    try:
        net.start()
        traffic = drive(net, rounds=3, transfers=3)
        run_to_settlement(net, traffic)
        # more waves of traffic until alpha has run into the hostile node's misbehaviour
        for _ in range(WAVES):
            if _errors(net, EXPECTED[mode][0]):
                break
            drive(net, rounds=2, transfers=3, traffic=traffic)
            run_to_settlement(net, traffic)
        check_invariants(net, traffic)
        return net, provider
    finally:
        provider.release.set()
        net.stop()


@pytest.mark.parametrize("mode", MODES)
def test_hostile_peer(mode):
    net, provider = _run_with_hostile(mode)
    kind, reasons = EXPECTED[mode]
    assert provider.misbehaved > 0
    assert _errors(net, kind) > 0
    if reasons:
        assert _refusals(net) & reasons, _refusals(net)
    # the honest nodes of beta kept serving alpha
    honest_deliveries = sum(node.refresher.delivered_counts().get(BETA, 0) for node in net.subnets[ALPHA].nodes.values())
    assert honest_deliveries > 0
    if mode == "relabeled_height":
        # the relabeled slice never entered a pool: no pooled slice claims a height beta never
        # certified (honest replicas a block apart may still be refused now and then, so the
        # refresher's penalties alone cannot show it)
        beta_height = net.subnets[BETA].height
        for node in net.subnets[ALPHA].nodes.values():
            with node.fetcher.pool() as pool:
                pooled = pool.get(BETA)
            assert pooled is None or pooled.certification_height <= beta_height


def test_peer_without_registry_listed_certificate():
    """beta-node-2's endpoint presents a certificate the registry does not list: alpha's
    clients (which trust exactly the listed certificate) never complete the handshake; and a
    client with an unlisted certificate is refused by the honest endpoints."""
    not_before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    impostor = generate_node_identity(HOSTILE, not_before)
    net = make_testnet(hooks={HOSTILE: NodeHooks(server_identity=impostor)})
    try:
        net.start()
        traffic = drive(net, rounds=2, transfers=2)
        run_to_settlement(net, traffic)
        for _ in range(WAVES):
            if _errors(net, "PeerUnavailable"):
                break
            drive(net, rounds=2, transfers=2, traffic=traffic)
            run_to_settlement(net, traffic)
        check_invariants(net, traffic)
        # and the other way round: an unlisted client gets nothing from an honest endpoint
        honest = net.current_registry.latest().node("beta-node-1")
        peer = PeerEndpoint(honest.node_id, honest.xnet_address, honest.certificate_pem)
        with XNetClient(impostor, timeout_s=2.0) as client:
            with pytest.raises((PeerUnavailable, PeerRejected)):
                client.get_stream_slice(peer, GetStreamSliceRequest(ALPHA, 0, 0, 10, 10_000))
    finally:
        net.stop()
    assert _errors(net, "PeerUnavailable") > 0


def test_invalid_block_proposal_is_refused_and_a_fallback_maker_takes_over(monkeypatch):
    """A block maker of alpha that puts a bad XNet payload into its proposal: every other
    node refuses it (``InvalidXNetPayloadInBlock``) and the next-ranked maker's block is final."""
    net = make_testnet()
    try:
        net.start()
        alpha: Subnet = net.subnets[ALPHA]
        liar = alpha.nodes["alpha-node-1"]
        honest_make = liar.make_block

        def make_bad_block(tip, now, rank, registry_version):
            block = honest_make(tip, now, rank, registry_version)
            import dataclasses
            return dataclasses.replace(block, xnet_payload=((BETA, b"\x94\x02\xc4\x00\xc4\x00\xc4\x00"),))

        monkeypatch.setattr(liar, "make_block", make_bad_block)
        traffic = drive(net, rounds=2, transfers=1)
        run_to_settlement(net, traffic)
        check_invariants(net, traffic)
        assert alpha.refusals["InvalidXNetPayloadInBlock"] > 0
        assert alpha.fallback_heights > 0
    finally:
        net.stop()
