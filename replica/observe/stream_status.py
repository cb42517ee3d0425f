"""Subnets and the streams between them, read from certified state (``replica testnet status``).

For each subnet ``S`` one ``read_state`` (through the ``Agent``, so the answer is verified
like a reply: root, threshold signature under ``S``'s registry key, no rollback, fresh
``/time``) reveals ``/time``, ``/metadata/height`` and, for every other subnet ``X``,
``/streams/X/header`` and ``/streams/X/messages`` (or proves them absent). From those:

* per subnet: certified height and time; ``rounds_per_s = Δheight / Δtime`` between two
  certified samples (the previous observation's, or a second read ``interval_s`` later);
* per stream ``S → X``: ``begin`` and ``end`` of ``S``'s stream to ``X``; ``signals_end`` and
  the reject signals (by reason) of ``X``'s stream to ``S`` — how far ``X`` has received
  ``S``'s messages, and which it refused; ``backlog = end − begin`` (messages ``S`` still
  holds because ``X`` has not acknowledged them); ``bytes``: the encoded message leaves.

Two numbers are what the nodes report, not certified state (marked so in the JSON): each
subnet's nodes up and finalized height (``GET /api/v2/status``), and each stream's age in
rounds of its oldest unacknowledged message (``/metrics``: the replicated state does not
record when a message entered a stream).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Mapping

from prometheus_client.parser import text_string_to_metric_families

from consensus_stub.registry import Registry
from replica.client.agent import Agent
from replica.client.agent_errors import AgentError
from replica.client.certificate import VerifiedCertificate
from replica.client.http_transport import HttpTransport
from replica.client.identity import Ed25519Identity
from replica.client.refusals import IngressRefused
from replica.errors import ReplicaError
from replica.ic.textual_ids import subnet_text
from replica.node.http_api import METRICS_PATH
from state_manager.codec import CodecError, decode_header_leaf
from state_manager.hash_tree import Absent, Found, Labeled, Leaf, flatten_forks, lookup_path
from state_manager.messages import MANAGEMENT_CANISTER_ID
from state_manager.streams import StreamHeader

__all__ = ["StatusError", "SubnetView", "StreamView", "TestnetView", "StatusReader"]

#: Who reads when the testnet's operator is not known (a reader made of a registry alone).
_READER = Ed25519Identity.from_seed(b"replica testnet status")


class StatusError(ReplicaError, RuntimeError):
    """A subnet's certified state could not be read or does not have the expected shape."""


@dataclass(frozen=True)
class SubnetView:
    subnet: str
    nodes: int
    nodes_up: int                      # node-reported
    finalized_height: int | None       # node-reported (highest of its nodes)
    certified_height: int | None
    certified_time_ns: int | None
    rounds_per_s: float | None
    error: str | None = None
    principal: str | None = None       # the subnet's IC principal (shown beside its name)


@dataclass(frozen=True)
class StreamView:
    source: str
    destination: str
    begin: int
    end: int
    signals_end: int | None            # None: the destination's certified state was not read
    backlog: int
    bytes: int
    reject_signals: dict[str, int] = field(default_factory=dict)
    oldest_unacknowledged_rounds: int | None = None     # node-reported
    source_height: int = 0
    destination_height: int | None = None


@dataclass(frozen=True)
class TestnetView:
    subnets: list[SubnetView]
    streams: list[StreamView]

    def as_json(self) -> dict:
        return {
            "subnets": [asdict(s) for s in self.subnets],
            "streams": [asdict(s) for s in self.streams],
            "node_reported": ["subnets[].nodes_up", "subnets[].finalized_height",
                              "streams[].oldest_unacknowledged_rounds"],
        }


@dataclass(frozen=True)
class _Sample:
    height: int
    time_ns: int
    headers: dict[str, StreamHeader]    # streams of this subnet, by destination (absent: no stream)
    bytes: dict[str, int]


def _stream_paths(peer: str) -> list[list[bytes]]:
    label = peer.encode()
    return [[b"streams", label, b"header"], [b"streams", label, b"messages"]]


def _leaf_bytes(certificate: VerifiedCertificate, path: list[bytes]) -> int:
    """Bytes of every leaf under ``path`` (0 if proven absent); the subtree must be revealed."""
    found = lookup_path(certificate.tree, path)
    if isinstance(found, Absent):
        return 0
    if not isinstance(found, Found):
        raise StatusError(f"the certificate does not reveal /{b'/'.join(path).decode(errors='replace')}")
    total, stack = 0, [found.tree]
    while stack:
        for node in flatten_forks(stack.pop()):
            if isinstance(node, Labeled):
                stack.append(node.subtree)
            elif isinstance(node, Leaf):
                total += len(node.value)
            else:
                raise StatusError("a stream's messages are pruned in the certificate")
    return total


class StatusReader:
    """Reads ``TestnetView``s of the testnet whose registry and node endpoints are given
    (``{subnet: {node id: "127.0.0.1:port"}}``)."""

    def __init__(self, registry: Registry, endpoints: Mapping[str, Mapping[str, str]], *,
                 timeout_s: float = 5.0, identity: Ed25519Identity | None = None) -> None:
        self.registry = registry
        self.endpoints = {s: dict(nodes) for s, nodes in endpoints.items()}
        self.subnets = [record.subnet_id for record in registry.latest().subnets]
        first = {s: next(iter(nodes.values())) for s, nodes in self.endpoints.items() if nodes}
        # the testnet's operator may read every call's status (replica.node.read_state)
        self._agent = Agent(first, identity or _READER, registry, timeout_s=timeout_s)
        self._http = HttpTransport(timeout_s)
        self._previous: dict[str, _Sample] = {}

    def close(self) -> None:
        self._agent.close()
        self._http.close()

    def __enter__(self) -> "StatusReader":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- certified state ----------------------------------------------------------------------

    def sample(self, subnet: str) -> _Sample:
        """One verified read of ``subnet``'s height, time and streams."""
        peers = [p for p in self.subnets if p != subnet]
        paths = [[b"metadata", b"height"]] + [path for peer in peers for path in _stream_paths(peer)]
        try:
            certificate = self._agent.read_state(MANAGEMENT_CANISTER_ID, paths, subnet=subnet)
            height = certificate.lookup_value([b"metadata", b"height"])
            headers, sizes = {}, {}
            for peer in peers:
                header_path, messages_path = _stream_paths(peer)
                raw = certificate.lookup(header_path)
                if raw is not None:
                    headers[peer] = decode_header_leaf(raw)
                sizes[peer] = _leaf_bytes(certificate, messages_path)
        except (AgentError, IngressRefused, CodecError) as exc:
            raise StatusError(f"{subnet}: {exc}") from exc
        if type(height) is not int:
            raise StatusError(f"{subnet}: /metadata/height is not an integer")
        return _Sample(height, certificate.time_ns, headers, sizes)

    def request_statuses(self, subnet: str, message_ids: list[bytes]) -> tuple[dict[bytes, str], int]:
        """``({message id: certified status or "unknown"}, certified height)`` in one verified read."""
        paths = [[b"request_status", m, b"status"] for m in message_ids]
        try:
            certificate = self._agent.read_state(MANAGEMENT_CANISTER_ID, paths, subnet=subnet)
            return ({m: certificate.lookup_value(p) or "unknown" for m, p in zip(message_ids, paths)},
                    certificate.height)
        except (AgentError, IngressRefused) as exc:
            raise StatusError(f"{subnet}: {exc}") from exc

    # -- what the nodes report ----------------------------------------------------------------

    def _node_statuses(self, subnet: str) -> list[dict]:
        answers = []
        for address in self.endpoints.get(subnet, {}).values():
            try:
                answers.append(self._agent.status(address))
            except (AgentError, IngressRefused, OSError):
                continue
        return answers

    def _ages(self, subnet: str) -> dict[str, int]:
        """``replica_stream_oldest_unacknowledged_rounds`` by remote, from the first node that answers."""
        for address in self.endpoints.get(subnet, {}).values():
            try:
                status, body, _ = self._http.request("GET", address, METRICS_PATH, None)
            except (AgentError, OSError):
                continue
            if status != 200:
                continue
            ages = {}
            for family in text_string_to_metric_families(body.decode("utf-8", "replace")):
                if family.name == "replica_stream_oldest_unacknowledged_rounds":
                    for s in family.samples:
                        ages[s.labels["remote"]] = int(s.value)
            return ages
        return {}

    # -- one view ---------------------------------------------------------------------------

    def view(self, interval_s: float = 1.0) -> TestnetView:
        """Read every subnet. Rates come from the previous ``view``'s samples; the first view
        reads twice, ``interval_s`` apart (0: no rates)."""
        samples: dict[str, _Sample] = {}
        errors: dict[str, str] = {}

        def read_all() -> None:
            for subnet in self.subnets:
                try:
                    samples[subnet] = self.sample(subnet)
                    errors.pop(subnet, None)
                except StatusError as exc:
                    errors[subnet] = str(exc)

        if not self._previous and interval_s > 0:
            read_all()
            self._previous = dict(samples)
            time.sleep(interval_s)
        read_all()
        subnets = []
        for subnet in self.subnets:
            sample, before = samples.get(subnet), self._previous.get(subnet)
            rate = None
            if sample is not None and before is not None and sample.time_ns > before.time_ns:
                rate = (sample.height - before.height) / ((sample.time_ns - before.time_ns) / 1e9)
            statuses = self._node_statuses(subnet)
            finalized = [s["finalized_height"] for s in statuses if type(s.get("finalized_height")) is int]
            record = self.registry.latest().subnet(subnet)
            subnets.append(SubnetView(
                subnet, len(record.node_ids) if record else 0, len(statuses), max(finalized, default=None),
                sample.height if sample else None, sample.time_ns if sample else None, rate, errors.get(subnet),
                subnet_text(record.public_key) if record else None))
        self._previous.update(samples)
        return TestnetView(subnets, self._streams(samples))

    def _streams(self, samples: Mapping[str, _Sample]) -> list[StreamView]:
        streams = []
        for source in self.subnets:
            sample = samples.get(source)
            if sample is None:
                continue
            ages = self._ages(source) if sample.headers else {}
            for destination, header in sorted(sample.headers.items()):
                back = samples.get(destination)
                reverse = back.headers.get(source) if back is not None else None
                signals_end = None if back is None else (reverse.signals_end if reverse is not None else 0)
                rejects: dict[str, int] = {}
                for signal in (reverse.reject_signals if reverse is not None else ()):
                    rejects[signal.reason.name] = rejects.get(signal.reason.name, 0) + 1
                streams.append(StreamView(
                    source, destination, header.begin, header.end, signals_end, header.end - header.begin,
                    sample.bytes.get(destination, 0), rejects, ages.get(destination), sample.height,
                    back.height if back is not None else None))
        return streams


def reader_for_testnet(directory) -> StatusReader:
    """A ``StatusReader`` of the running testnet in ``directory`` (its ``registry.bin`` and
    ``http/<subnet>.json``)."""
    from pathlib import Path

    from consensus_stub.registry import RegistryError, decode_registry

    from replica.testnet.http_endpoints import read_http_endpoints
    from replica.testnet.launcher import TestnetLayout

    layout = TestnetLayout(Path(directory))
    try:
        registry = decode_registry(layout.registry.read_bytes())
    except (OSError, RegistryError) as exc:
        raise StatusError(f"{layout.root} holds no readable registry: {exc}") from exc
    try:
        operator = layout.operator()
    except ReplicaError:
        operator = None   # a directory without a seed: the reader sees the statuses of its own calls only
    return StatusReader(registry, read_http_endpoints(directory), identity=operator)


def format_view(view: TestnetView) -> list[str]:
    """The human-readable table of ``replica testnet status``."""
    lines = [f"{'subnet':<10} {'nodes up':>8} {'finalized':>9} {'certified':>9} {'rounds/s':>8}"]
    for s in view.subnets:
        rate = f"{s.rounds_per_s:.2f}" if s.rounds_per_s is not None else "-"
        lines.append(f"{s.subnet:<10} {f'{s.nodes_up}/{s.nodes}':>8} {s.finalized_height if s.finalized_height is not None else '-':>9} "
                     f"{s.certified_height if s.certified_height is not None else '-':>9} {rate:>8}"
                     + (f"  error: {s.error}" if s.error else ""))
    if view.streams:
        lines.append("")
        lines.append(f"{'stream (certified)':<24} {'begin':>7} {'end':>7} {'sig_end':>7} {'backlog':>7} "
                     f"{'oldest':>6} {'bytes':>9}  rejects")
        for st in view.streams:
            rejects = " ".join(f"{reason}={n}" for reason, n in sorted(st.reject_signals.items())) or "-"
            oldest = "-" if st.oldest_unacknowledged_rounds is None else st.oldest_unacknowledged_rounds
            signals_end = "-" if st.signals_end is None else st.signals_end
            lines.append(f"{st.source + ' -> ' + st.destination:<24} {st.begin:>7} {st.end:>7} {signals_end:>7} "
                         f"{st.backlog:>7} {oldest:>6} {st.bytes:>9}  {rejects}")
        lines.append("(oldest: rounds since the oldest unacknowledged message entered the stream, as its "
                     "subnet's node reports it)")
    return lines
