"""A node's Prometheus metrics (shell): one ``CollectorRegistry`` per node, served at ``/metrics``.

Every number a node exports goes through its ``NodeMetrics.registry``; nothing is counted
twice in separate places. Two kinds of numbers:

* **observed by the shell** as things happen (prometheus-client instruments):

  =============================================  ====================================================
  ``replica_round_duration_seconds``             histogram: block → batch → ``execute_round`` → commit
  ``replica_certification_duration_seconds``     histogram: commit → certification delivered
  ``replica_block_validation_failures_total``    proposals this node refused, by ``reason`` (error class)
  ``replica_ingress_refusals_total``             HTTP ``call`` / ``query`` refusals, by ``reason``
  ``replica_ingress_pool_refusals_total``        messages this node did not admit to its ingress pool,
                                                 by ``reason`` (also those another node admitted first)
  ``replica_reject_signals_total``               reject signals this node's state added to our stream
                                                 to ``remote``, by ``reason`` (``RejectReason`` name)
  ``xnet_slice_fetch_duration_seconds``          histogram per ``remote`` subnet, successful fetches
  ``replica_message_instructions``               histogram of the instructions each message this node
                                                 executed used, by ``kind`` (``update``, ``callback``,
                                                 ``query``: a user's query, or a canister's call to a
                                                 query method; ``install``: an install or upgrade
                                                 from source); builtin canisters count 0
  ``replica_instruction_limit_traps_total``      messages that trapped on their instruction limit,
                                                 by ``kind``
  ``replica_state_divergences_total``            times this node's root differed from the root the
                                                 subnet certified (it stops signing and recovers)
  ``replica_state_recoveries_total``             diverged states replaced by a certified checkpoint
  ``replica_certification_stalls_total``         heights left uncertified while the subnet finalized
                                                 past them, by ``reason`` (``shares_disagree``,
                                                 ``too_few_shares``)
  ``replica_diverged_height``                    gauge: the height this node diverged at (0: not)
  ``replica_certification_stalled_height``       gauge: the height certification stalls at (0: not)
  =============================================  ====================================================

* **read at scrape time** from a ``NodeSummary`` (taken after every commit, so a scrape never
  reads a state a round is changing) and from the XNet fetch path's own records:

  =============================================  ====================================================
  ``replica_finalized_height``                   latest executed height
  ``replica_certified_height``                   latest certified height
  ``replica_stream_begin|end|signals_end``       per ``remote``: our stream's header
  ``replica_stream_messages``                    per ``remote``: ``end − begin``, messages not yet
                                                 acknowledged by the receiver (the backlog)
  ``replica_stream_bytes``                       per ``remote``: their size as routing counts it
                                                 (what ``max_stream_bytes`` limits; ``testnet status``
                                                 shows their encoded bytes in the certified tree)
  ``replica_stream_oldest_unacknowledged_rounds``  per ``remote``: rounds since the message at
                                                 ``begin`` entered the stream (0 if none)
  ``replica_stream_reject_signals``              per ``remote`` and ``reason``: signals held now
  ``replica_messages_inducted_total``            by ``kind`` (``xnet``, ``ingress``) — state counters
  ``replica_messages_dropped_total``             by ``reason`` — state counters
  ``replica_ingress_rejected_total``, ``replica_synthetic_rejects_total``,
  ``replica_critical_errors_total``              state counters
  ``xnet_slice_fetch_failures_total``            per ``peer`` node and ``reason`` (the refresher's record)
  ``xnet_slice_validation_failures_total``       per ``remote`` and ``reason`` (the fetcher's record)
  =============================================  ====================================================

The state counters live in the replicated state (``metadata.counters``: the pure core counts,
and the counts are hashed like the rest of the state); this module only exports them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from replica.execution.message_execution import MessageUsage
from state_manager.replicated_state import ReplicatedState
from state_manager.streams import RejectReason

__all__ = ["CONTENT_TYPE", "StreamSummary", "NodeSummary", "StreamAges", "NodeMetrics", "summarize"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: Rounds take ~0.01-1 s; certification follows within a round; fetches take ms.
_ROUND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Instructions of one message: from a trivial method to the update limit (``Limits``).
_INSTRUCTION_BUCKETS = (100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000)
_FETCH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

#: ``metadata.counters`` name → (metric, label name, label value).
_STATE_COUNTERS = {
    "xnet_messages_inducted": ("replica_messages_inducted", "kind", "xnet"),
    "ingress_inducted": ("replica_messages_inducted", "kind", "ingress"),
    "dropped_invalid_sender": ("replica_messages_dropped", "reason", "invalid_sender"),
    "dropped_responses_without_callback": ("replica_messages_dropped", "reason", "response_without_callback"),
    "dropped_responses_unroutable": ("replica_messages_dropped", "reason", "response_unroutable"),
    "ingress_rejected": ("replica_ingress_rejected", None, None),
    "synthetic_rejects": ("replica_synthetic_rejects", None, None),
    "critical_errors": ("replica_critical_errors", None, None),
}
_HELP = {
    "replica_messages_inducted": "Messages inducted into canister queues (replicated state counter)",
    "replica_messages_dropped": "Messages dropped at induction, by reason (replicated state counter)",
    "replica_ingress_rejected": "Ingress messages the valid set rule rejected (replicated state counter)",
    "replica_synthetic_rejects": "Synthetic reject responses generated (replicated state counter)",
    "replica_critical_errors": "Broken internal invariants (replicated state counter); should stay 0",
}


@dataclass(frozen=True, slots=True)
class StreamSummary:
    """Our stream to one remote subnet at one height."""

    begin: int
    end: int
    signals_end: int
    byte_size: int
    reject_signals: Mapping[str, int]
    oldest_unacknowledged_rounds: int


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """What a scrape reports of the node's state: immutable, replaced after every commit."""

    height: int = 0
    counters: Mapping[str, int] = field(default_factory=dict)
    streams: Mapping[str, StreamSummary] = field(default_factory=dict)


class StreamAges:
    """The height at which each index of our streams was appended (shell bookkeeping: the
    replicated state does not record it). Per remote subnet a list of ``(end, height)`` steps:
    messages ``[previous end, end)`` entered at ``height``; steps below ``begin`` are dropped."""

    def __init__(self) -> None:
        self._steps: dict[str, list[tuple[int, int]]] = {}

    def observe(self, remote: str, height: int, begin: int, end: int) -> int:
        """Record the stream at ``height``; return the age in rounds of the message at ``begin``."""
        steps = self._steps.setdefault(remote, [])
        last_end = steps[-1][0] if steps else begin
        if end > last_end:
            steps.append((end, height))
        while steps and steps[0][0] <= begin:
            steps.pop(0)
        if begin >= end or not steps:
            return 0
        # A stream seen for the first time (a restart) counts its messages from now.
        return height - steps[0][1]


def summarize(state: ReplicatedState, ages: StreamAges) -> NodeSummary:
    """A ``NodeSummary`` of ``state`` (updating ``ages``)."""
    own, height = state.metadata.own_subnet_id, state.metadata.batch_number
    streams = {}
    for remote, stream in state.streams.items():
        if remote == own:
            continue
        reasons: dict[str, int] = {}
        for signal in stream.reject_signals:
            reasons[signal.reason.name] = reasons.get(signal.reason.name, 0) + 1
        streams[remote] = StreamSummary(stream.begin, stream.end, stream.signals_end, stream.byte_size, reasons,
                                        ages.observe(remote, height, stream.begin, stream.end))
    return NodeSummary(height, dict(state.metadata.counters), streams)


class NodeMetrics:
    """The metrics of node ``node_id`` (module docstring). Thread-safe: instruments lock
    themselves; the summary is replaced whole."""

    def __init__(self, subnet_id: str, node_id: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.subnet_id, self.node_id = subnet_id, node_id
        self._clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.round_duration = Histogram("replica_round_duration_seconds", "Time to execute and commit one block",
                                        buckets=_ROUND_BUCKETS, registry=r)
        self.certification_duration = Histogram(
            "replica_certification_duration_seconds", "Time from commit to the certification of that height",
            buckets=_ROUND_BUCKETS, registry=r)
        self.block_validation_failures = Counter(
            "replica_block_validation_failures", "Block proposals this node refused, by reason", ["reason"], registry=r)
        self.ingress_refusals = Counter(
            "replica_ingress_refusals", "Ingress calls and queries the HTTP API refused, by reason", ["reason"],
            registry=r)
        self.ingress_pool_refusals = Counter(
            "replica_ingress_pool_refusals", "Ingress messages this node did not admit to its pool, by reason",
            ["reason"], registry=r)
        self.reject_signals = Counter(
            "replica_reject_signals", "Reject signals added to our stream to a remote subnet, by reason",
            ["remote", "reason"], registry=r)
        self.slice_fetch_duration = Histogram(
            "xnet_slice_fetch_duration_seconds", "Latency of successful slice fetches from a remote subnet",
            ["remote"], buckets=_FETCH_BUCKETS, registry=r)
        self.message_instructions = Histogram(
            "replica_message_instructions", "Instructions used by each executed message, by kind",
            ["kind"], buckets=_INSTRUCTION_BUCKETS, registry=r)
        self.instruction_limit_traps = Counter(
            "replica_instruction_limit_traps", "Messages that trapped on their instruction limit, by kind",
            ["kind"], registry=r)
        self.state_divergences = Counter(
            "replica_state_divergences", "Times this node's state root differed from the subnet's certified root",
            registry=r)
        self.state_recoveries = Counter(
            "replica_state_recoveries", "Diverged states replaced by a checkpoint the subnet certified", registry=r)
        self.certification_stalls = Counter(
            "replica_certification_stalls", "Heights left uncertified while the subnet finalized past them, by reason",
            ["reason"], registry=r)
        self.diverged_height = Gauge(
            "replica_diverged_height", "The height this node's state diverged at (0: it has not)", registry=r)
        self.stalled_height = Gauge(
            "replica_certification_stalled_height", "The height certification stalls at (0: it does not)",
            registry=r)
        self._lock = threading.Lock()
        self._summary = NodeSummary()
        self._certified_height = 0
        self._committed_at: dict[int, float] = {}
        self._ages = StreamAges()
        self._fetch_failures: Callable[[], Mapping[tuple[str, str], int]] = dict
        self._validation_failures: Callable[[], Mapping[tuple[str, str], int]] = dict
        r.register(_SummaryCollector(self))

    # -- fed by the node ----------------------------------------------------------------------

    def read_fetch_records(self, fetch_failures: Callable[[], Mapping[tuple[str, str], int]],
                           validation_failures: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        """Where scrapes read failed fetches per ``(peer node, reason)`` (the refresher keeps
        them) and refused slices per ``(remote subnet, reason)`` (the shared fetcher keeps them)."""
        self._fetch_failures, self._validation_failures = fetch_failures, validation_failures

    def committed(self, state: ReplicatedState, seconds: float) -> None:
        """After a commit: the round's duration, the new summary, new reject signals by reason."""
        previous = self._summary
        summary = summarize(state, self._ages)
        for remote, stream in summary.streams.items():
            before = previous.streams.get(remote)
            if before is None or stream.signals_end <= before.signals_end:
                continue
            for signal in state.streams[remote].reject_signals:
                if signal.index >= before.signals_end:
                    self.reject_signals.labels(remote, signal.reason.name).inc()
        self.round_duration.observe(seconds)
        with self._lock:
            self._summary = summary
            self._committed_at[summary.height] = self._clock()

    def restored(self, state: ReplicatedState) -> None:
        """The state a node starts from (genesis or a replayed log): a summary, no observations."""
        with self._lock:
            self._summary = summarize(state, self._ages)

    def certified(self, height: int) -> None:
        with self._lock:
            started = self._committed_at.pop(height, None)
            for old in [h for h in self._committed_at if h < height]:
                del self._committed_at[old]
            self._certified_height = max(self._certified_height, height)
        if started is not None:
            self.certification_duration.observe(max(0.0, self._clock() - started))

    def message_executed(self, canister_id: int, message: object, usage: MessageUsage) -> None:
        """An executed message (the execution's observer; ``message`` is None for a query)."""
        self.message_instructions.labels(usage.kind).observe(usage.instructions)
        if usage.limit_exceeded:
            self.instruction_limit_traps.labels(usage.kind).inc()

    def diverged(self, height: int) -> None:
        self.state_divergences.inc()
        self.diverged_height.set(height)

    def recovered(self) -> None:
        self.state_recoveries.inc()
        self.diverged_height.set(0)

    def stalled(self, height: int, reason: str | None) -> None:
        """Certification stalls at ``height`` since now (``reason``), or no longer (``0``, ``None``)."""
        if reason is not None:
            self.certification_stalls.labels(reason).inc()
        self.stalled_height.set(height)

    def block_refused(self, reason: str) -> None:
        self.block_validation_failures.labels(reason).inc()

    def ingress_refused(self, reason: str) -> None:
        self.ingress_refusals.labels(reason).inc()

    def ingress_pool_refused(self, reason: str) -> None:
        self.ingress_pool_refusals.labels(reason).inc()

    def slice_fetched(self, remote: str, seconds: float) -> None:
        self.slice_fetch_duration.labels(remote).observe(seconds)

    # -- read by scrapes ------------------------------------------------------------------------

    def snapshot(self) -> tuple[NodeSummary, int]:
        with self._lock:
            return self._summary, self._certified_height

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


class _SummaryCollector:
    """The scrape-time half of the registry (module docstring)."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable:
        return []  # families depend on the streams present; collected fresh on every scrape

    def collect(self) -> Iterable:
        summary, certified_height = self._metrics.snapshot()
        yield _gauge("replica_finalized_height", "Latest executed (finalized) height", summary.height)
        yield _gauge("replica_certified_height", "Latest certified height", certified_height)
        yield from _stream_families(summary.streams)
        yield from _state_counter_families(summary.counters)
        yield _pair_counter("xnet_slice_fetch_failures", "Failed slice fetches, by peer node and reason",
                            ("peer", "reason"), self._metrics._fetch_failures())
        yield _pair_counter("xnet_slice_validation_failures",
                            "Fetched slices refused (decode, signature, indices), by remote subnet and reason",
                            ("remote", "reason"), self._metrics._validation_failures())


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _stream_families(streams: Mapping[str, StreamSummary]) -> Iterable:
    fields = (
        ("replica_stream_begin", "Index of the oldest message still in our stream to remote", lambda s: s.begin),
        ("replica_stream_end", "Index after the newest message in our stream to remote", lambda s: s.end),
        ("replica_stream_signals_end", "Next index we expect in remote's stream to us", lambda s: s.signals_end),
        ("replica_stream_messages", "Messages in our stream to remote not yet acknowledged (backlog)",
         lambda s: s.end - s.begin),
        ("replica_stream_bytes", "Size of the messages in our stream to remote, as the stream byte limit counts it",
         lambda s: s.byte_size),
        ("replica_stream_oldest_unacknowledged_rounds",
         "Rounds since the oldest unacknowledged message of our stream to remote entered it",
         lambda s: s.oldest_unacknowledged_rounds),
    )
    for name, documentation, value in fields:
        family = GaugeMetricFamily(name, documentation, labels=["remote"])
        for remote, stream in sorted(streams.items()):
            family.add_metric([remote], value(stream))
        yield family
    signals = GaugeMetricFamily("replica_stream_reject_signals",
                                "Reject signals our stream to remote holds now, by reason", labels=["remote", "reason"])
    for remote, stream in sorted(streams.items()):
        for reason in RejectReason:
            signals.add_metric([remote, reason.name], stream.reject_signals.get(reason.name, 0))
    yield signals


def _state_counter_families(counters: Mapping[str, int]) -> Iterable:
    families: dict[str, CounterMetricFamily] = {}
    for counter, (name, label, value) in _STATE_COUNTERS.items():
        family = families.get(name)
        if family is None:
            family = families[name] = CounterMetricFamily(name, _HELP[name], labels=[label] if label else [])
        family.add_metric([value] if label else [], counters.get(counter, 0))
    return families.values()


def _pair_counter(name: str, documentation: str, labels: tuple[str, str],
                  counts: Mapping[tuple[str, str], int]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=list(labels))
    for (first, second), count in sorted(counts.items()):
        family.add_metric([first, second], count)
    return family
