"""XNet without sockets: a node pulls certified slices straight from a peer's slice provider.

The deterministic testnet replaces the gRPC client and the refresher thread with one call,
and keeps everything else a live network does to a slice:

    request = fetcher.wanted(peer subnet)                     (next indices, as the refresher asks)
    data    = peer's provider.get_stream_slice(request)       (encode_certified_stream_slice from a
                                                               certified snapshot, as its endpoint serves)
    fetcher.deliver(peer subnet, data)                        (decode + verify under the registry key,
                                                               check against the request, pool)

and the block maker and every validator then take it through ``get_xnet_payload`` /
``validate_xnet_payload`` as usual. "No stream yet" and "nothing new" are honest empty
answers (the endpoint's NOT_FOUND / OUT_OF_RANGE), not faults.
"""

from __future__ import annotations

from typing import Iterable

from state_manager import certified_slice as cs

from replica.node.replica_node import ReplicaNode
from xnet.slice_provider import CertifiedSliceProvider

__all__ = ["pull_slices"]


#: What a node last asked a peer subnet for, and the certified header it was answered from.
LastPulls = dict[tuple[str, str], tuple[object, object]]


def pull_slices(node: ReplicaNode, peers: Iterable[tuple[str, CertifiedSliceProvider, object]],
                last: LastPulls) -> int:
    """Deliver to ``node`` one slice from each ``(peer subnet, the peer's slice provider, header
    of the peer's stream to us in the snapshot it serves)`` that has something new for it;
    return how many slices were accepted into its pool.

    The same request answered from an unchanged certified header carries the same messages
    and signals as the last answer (only the certified height differs): it is skipped, as the
    fetcher would discard it after paying for its signature check."""
    accepted = 0
    for peer_subnet, provider, header in peers:
        request = node.fetcher.wanted(peer_subnet)
        if request is None:
            continue
        key = (node.node_id, peer_subnet)
        if last.get(key) == (request, header):
            continue
        last[key] = (request, header)
        try:
            data = provider.get_stream_slice(
                request.subnet, request.witness_begin, request.msg_begin, request.msg_limit, request.byte_limit)
        except (cs.NoStream, cs.IndexOutOfRange):
            continue
        if node.fetcher.deliver(peer_subnet, data):
            accepted += 1
    return accepted
