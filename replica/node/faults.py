"""Fault injection for tests: make one node's state diverge from its subnet's (a knob, never
used in production; docs/architecture.md, *Guarantees, and where each is tested*).

``diverge_state`` (``NodeProcessConfig.fault_diverge_at_height``, ``NodeHooks.diverge_at`` of
the in-process subnet) changes the state a node computes at one height, after executing its
block and before committing it: the state's time moves back by the node's index in
nanoseconds, and the state counter ``fault_injected_divergence`` grows by it. So

* the certified root of that height differs (``/time``), and so does every later one (the
  full hash of each height is hashed into the next one's ``/metadata/prev_state_hash``):
  the node stays diverged until it replaces its state;
* two nodes given the knob diverge from each other too (their indices differ), so knobs on
  enough nodes leave no root with ``t`` shares: certification stalls;
* it is deterministic: re-executing the height (a restart replaying its block log) gives the
  same diverged state, as the node's record of its hashes expects;
* the next batch's time is still not before the state's (time only moves back).
"""

from __future__ import annotations

from state_manager.replicated_state import ReplicatedState

__all__ = ["FAULT_COUNTER", "diverge_state"]

#: The state counter the fault grows (in the full tree, and in ``/metrics`` with the others).
FAULT_COUNTER = "fault_injected_divergence"


def diverge_state(state: ReplicatedState, node_index: int) -> None:
    """Perturb ``state`` in place as node ``node_index``'s fault would (module docstring)."""
    metadata = state.metadata
    metadata.batch_time = max(0, metadata.batch_time - node_index)
    metadata.count(FAULT_COUNTER, node_index)

