"""Whether a node's certification is healthy, said loudly (shell; docs/architecture.md,
*Guarantees, and where each is tested*: divergence).

A ``Node`` tells its ``CertificationHealth`` what it found
(``consensus_stub.agreement.divergence`` decides what it is):

* ``diverged``: its root at a height is not the root the subnet certified there. One ERROR
  line names the height, its own root, the certified root, which nodes signed which root and
  the messages executed at that height; ``replica_state_divergences_total`` counts it and
  ``replica_diverged_height`` shows it until ``recovered`` (the node replaced its state with
  a certified checkpoint, state sync);
* ``observe_stall``: a height stays uncertified while the subnet finalizes past it. An ERROR
  line when the shares disagree (a WARNING when too few came), with the same detail;
  ``replica_certification_stalls_total`` counts each stall, ``replica_certification_stalled_height``
  shows it until certification moves past it.

``summary`` is one line for a status display ("diverged at 12: ..." / "certification stalled
since 12: shares disagree (root a…: n1,n2; root b…: n3)" / "ok"); ``as_json`` is what
``status.json`` carries under ``certification``.
"""

from __future__ import annotations

import logging
from typing import Optional

from consensus_stub.agreement.divergence import CertificationStall, Divergence, short_root
from consensus_stub.block import Block
from replica.ic.textual_ids import canister_text
from xnet.xnet_payload import decode_xnet_payload

from .metrics import NodeMetrics

__all__ = ["CertificationHealth", "executed_messages"]

_log = logging.getLogger(__name__)


def executed_messages(block: Optional[Block]) -> tuple[str, ...]:
    """The messages a finalized block brought to execution, one line each: its ingress
    (message id, canister, method: ``replica trace`` takes the id) and its XNet slices."""
    if block is None:
        return ()
    lines = [f"ingress {m.message_id.hex()} to canister {canister_text(m.receiver)} method {m.method_name}"
             for m in block.ingress]
    try:
        slices = decode_xnet_payload(block.xnet_payload)
    except Exception as exc:  # noqa: BLE001 - agreed before; a report must not fail on it
        lines.append(f"xnet payload not decoded: {type(exc).__name__}")
        slices = ()
    for subnet, piece in slices:
        if piece.messages:
            end = piece.messages_begin + len(piece.messages)
            lines.append(f"xnet from {subnet}: stream messages [{piece.messages_begin}, {end})")
    return tuple(lines)


class CertificationHealth:
    """One node's divergence and stall record (module docstring)."""

    def __init__(self, node_id: str, metrics: NodeMetrics) -> None:
        self.node_id = node_id
        self._metrics = metrics
        self.divergence: Optional[Divergence] = None
        self.stall: Optional[CertificationStall] = None
        #: The messages executed at the height of the divergence or the stall.
        self.messages: tuple[str, ...] = ()
        #: ``{"diverged_at", "installed", "from"}`` of the last recovery.
        self.last_recovery: Optional[dict] = None
        self.divergences = 0

    def diverged(self, divergence: Divergence, messages: tuple[str, ...]) -> bool:
        """Record a divergence; whether it is a new one (one is kept until ``recovered``)."""
        if self.divergence is not None:
            return False
        self.divergence, self.messages = divergence, messages
        self.divergences += 1
        self._metrics.diverged(divergence.height)
        _log.error("%s: state %s; it stops signing and recovers from a certified checkpoint. Executed at height %d: "
                   "%s", self.node_id, divergence.describe(), divergence.height, "; ".join(messages) or "no messages")
        return True

    def recovered(self, installed: int, source: str) -> None:
        divergence = self.divergence
        if divergence is None:
            return
        self.last_recovery = {"diverged_at": divergence.height, "installed": installed, "from": source}
        self.divergence = None
        if self.stall is None:
            self.messages = ()
        self._metrics.recovered()
        _log.warning("%s: recovered from the divergence at height %d: installed the certified state of height %d "
                     "(%s, root matches); signing again", self.node_id, divergence.height, installed, source)

    def observe_stall(self, stall: Optional[CertificationStall], messages: tuple[str, ...] = ()) -> None:
        """The stall seen now (``None``: certification is not stalled)."""
        before = self.stall
        if stall is None:
            if before is not None:
                self.stall = None
                self._metrics.stalled(0, None)
                _log.warning("%s: certification moves again past height %d", self.node_id, before.height)
            return
        if before is not None and before.height == stall.height and before.reason == stall.reason:
            self.stall = stall   # the same stall, its shares as they are now
            return
        self.stall = stall
        if self.divergence is None:
            self.messages = messages
        self._metrics.stalled(stall.height, "shares_disagree" if stall.shares.disagree else "too_few_shares")
        level = logging.ERROR if stall.shares.disagree else logging.WARNING
        _log.log(level, "%s: %s; the subnet has finalized up to %d. Executed at height %d: %s", self.node_id,
                 stall.describe(), stall.finalized_height, stall.height, "; ".join(messages) or "no messages")

    def summary(self) -> str:
        if self.divergence is not None:
            d = self.divergence
            return (f"diverged at {d.height}: own root {short_root(d.own_root)}, certified "
                    f"{short_root(d.certified_root)} ({d.shares.describe()}); recovering by state sync")
        if self.stall is not None:
            return self.stall.describe()
        return "ok"

    def as_json(self) -> dict:
        return {
            "state": "diverged" if self.divergence is not None else "stalled" if self.stall is not None else "ok",
            "summary": self.summary(),
            "diverged": self.divergence.as_json() if self.divergence is not None else None,
            "stalled": self.stall.as_json() if self.stall is not None else None,
            "messages": list(self.messages),
            "divergences": self.divergences,
            "last_recovery": self.last_recovery,
        }
