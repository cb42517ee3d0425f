"""What a node's or a subnet's status file says of its latest state (heights, streams, calls)."""

from __future__ import annotations

from typing import Any

__all__ = ["state_status"]


def state_status(state: Any) -> dict:
    """The state's part of a status file: its height and registry version (of its latest
    batch), XNet messages inducted, critical errors, each outgoing stream as ``[begin, end,
    signals_end]``, and whether any call is still open."""
    own = state.own_subnet_id
    return {
        "height": state.metadata.batch_number,
        "registry_version": state.metadata.network_topology.registry_version,
        "xnet_inducted": state.metadata.counters["xnet_messages_inducted"],
        "critical_errors": state.metadata.counters["critical_errors"],
        "streams": {dst: [s.begin, s.end, s.signals_end] for dst, s in state.streams.items() if dst != own},
        "open_calls": any(c.call_contexts or c.callbacks for c in state.canisters.values()),
    }
