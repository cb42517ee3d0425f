"""What a subnet asks one peer subnet for: the ``GetStreamSlice`` request (pure).

The pull side decides it (``SliceFetcher.next_request``), the transport carries it
(``xnet.grpc.messages`` encodes and checks it, ``xnet.grpc.client`` sends it) and the serving
side answers its fields (``SliceProvider.get_stream_slice``). The type lives here, below the
transport, so that the pure fetcher never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GetStreamSliceRequest"]


@dataclass(frozen=True, slots=True)
class GetStreamSliceRequest:
    """Ask for the stream to ``subnet``: messages from ``msg_begin`` (at most ``msg_limit`` of
    them, at most ``byte_limit`` bytes), with a witness starting at ``witness_begin``."""

    subnet: str
    witness_begin: int
    msg_begin: int
    msg_limit: int
    byte_limit: int
