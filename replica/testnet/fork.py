"""A new testnet that starts where a recorded one was: ``replica testnet fork --from D --at H --dir NEW``.

``fork_testnet(source, at, target)`` writes a testnet directory whose subnets begin at the
state a recorded run of ``source`` had committed at height ``H`` (docs/architecture.md,
*Forks and dry runs*). What it takes from ``source`` (a testnet directory, stopped or running;
it is only read, never written):

* the run log ``DIR/run`` (written by ``replica testnet down``): per subnet its genesis, its
  batches, the hashes committed at every height and checkpoints every few heights; or, when
  the run log does not reach ``H`` (a running testnet), what its nodes record as they run:
  the executed log (batch and hashes per height, from genesis) of the subnet's node that
  executed the most, up to the subnet's certified height, and the checkpoints its nodes keep
  (every 100 heights, the newest few). The state of height ``H`` is the nearest checkpoint at
  or below ``H`` with the recorded batches above it replayed through the audit's replay
  (``replica.audit.replay.replay_states``: the node's own batch processor), every replayed
  height checked against the recorded hashes, so the fork's state hash at ``H`` *is* the
  recorded one or the fork is refused (``ForkError``);
* ``registry.bin``: its versions up to the one the forked states run at (``V``), so the
  fork's history replays as the source's did; the manifest (canister modules, limits, tick).

**Heights.** ``H`` is a height of each subnet: every subnet takes its own state after its
own batch ``H`` (or a height per subnet: ``{"subnet-1": 4990}``). Subnets make heights at
their own pace, so the chosen states must agree on the messages between them: for every
ordered pair (A, B), B has inducted no more of A's stream than A had sent, and A has not
garbage-collected what B had not yet acknowledged (``A.begin <= B.signals_end <= A.end``).
A choice that breaks this is refused (``ForkInconsistent``, naming the pair and indices);
choose other heights per subnet, or ``align``: the subnets not named fork at the moment of
the first one named, the highest height whose block time is at most that height's
(``aligned_heights``) — states of one moment agree, as one machine's clock stamps every
block of a local testnet.

**What carries over and what does not.** Everything in the replicated state: canisters (ids,
code, stable state, logs), their queues and call contexts, the streams with every message in
flight between subnets (delivered by the fork, exactly once, from the indices above), and the
ingress history (request statuses stay readable). Not carried over: what was never state —
ingress waiting in the source's pools, unfinalized blocks. Time jumps to the fork's wall
clock at its first block, so bounded-wait calls past their deadline time out then.

**Keys.** The fork gets its own nodes and keys: registry version ``V + 1`` keeps ``V``'s
subnets, routing table and migrations, with fresh node TLS identities and a freshly dealt
threshold key per subnet. Its certificates verify only under the fork's keys, never the
source's, so neither can be taken for the other. The fork's chain continues from a base
block hash of its own (``fork_base_hash``), not the source's block.

**The directory.** Per node (``nodes/<node>/``): a checkpoint of height ``H`` (which the node
verifies against the recorded full hash when it loads it), a block log whose base is ``H``,
and ``executed.log`` holding the source's recorded heights ``1..H``, so the fork's own run log
(at its ``down``) is the whole history: the source's genesis and batches up to ``H``, then the
fork's. The fork is written into a temporary directory beside ``target`` and renamed into
place: a fork is complete or absent. ``target`` must not exist or be empty, and must not lie
inside ``source``.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from consensus_stub.block_store import ChainBase, replace_block_log
from consensus_stub.genesis import GenesisError, SubnetSpec, encode_node_secrets, genesis_registry
from consensus_stub.registry import Registry, RegistryError, decode_registry, encode_registry
from message_routing.batch import decode_batch
from replica.audit.errors import AuditError
from replica.audit.inputs import context_for
from replica.audit.perturbation import Perturbation
from replica.audit.replay import replay_states
from replica.audit.run_log import RunLog, SubnetLog, limits_preset_name, load_run_log
from replica.node.checkpoints import NodeCheckpoints
from replica.node.node_store import ExecutedLog, NodeStoreError, read_executed_log
from replica.node.process_config import NodeProcessConfig
from replica.progress import Progress
from state_manager.codec import CodecError
from state_manager.replicated_state import ReplicatedState
from state_manager.store import CorruptCheckpoint, read_checkpoint_bytes

from .launcher import TestnetError, TestnetLayout, write_atomically

__all__ = ["ForkError", "ForkInconsistent", "ForkedSubnet", "ForkReport", "fork_testnet", "fork_heights",
           "aligned_heights", "check_streams", "fork_base_hash", "started_states"]

_BASE_DOMAIN = b"\x12replica-fork-base"


class ForkError(TestnetError):
    """A fork that cannot be made: the source, the height or the target, with the reason."""


class ForkInconsistent(ForkError):
    """The chosen heights give states that disagree on the messages between two subnets."""


@dataclass(frozen=True)
class ForkedSubnet:
    subnet_id: str
    height: int
    #: The checkpoint the state was rebuilt from (0: genesis) and the recorded blocks replayed on it.
    checkpoint_height: int
    replayed: int
    full_hash: bytes
    certified_root: bytes


@dataclass(frozen=True)
class ForkReport:
    source: Path
    target: Path
    subnets: tuple[ForkedSubnet, ...]
    #: The fork's own registry version (the source's ``V`` + 1: new nodes and keys).
    registry_version: int
    nodes: int
    seconds: float


def fork_heights(log: RunLog, at: int | Mapping[str, int]) -> dict[str, int]:
    """``{subnet: height}`` of ``at`` (one height for all, or per subnet: the others take the
    highest given), each between 1 and what the run recorded."""
    subnets = log.subnet_ids()
    if type(at) is int:
        heights = {s: at for s in subnets}
    elif not isinstance(at, Mapping):
        raise ForkError(f"a fork height is an integer or {{subnet: height}}, not {at!r}")
    else:
        unknown = sorted(set(at) - set(subnets))
        if unknown or not at:
            raise ForkError(f"no subnet {', '.join(unknown) or '(none given)'} in the run; "
                            f"its subnets are {', '.join(subnets)}")
        default = max(at.values())
        heights = {s: at.get(s, default) for s in subnets}
    for subnet, height in heights.items():
        _check_height(log, subnet, height)
    return heights


def _check_height(log: RunLog, subnet: str, height: object) -> None:
    recorded = log.subnet(subnet).height
    if type(height) is not int or height < 1:
        raise ForkError(f"a fork height is a positive integer, not {height!r}")
    if height > recorded:
        raise ForkError(f"subnet {subnet} recorded heights 1..{recorded}; it has no height {height}")


def _state_at(log: RunLog, subnet: str, height: int, context) -> tuple[ReplicatedState, ForkedSubnet]:
    """The subnet's state of ``height``: nearest checkpoint, recorded batches replayed on it,
    every height checked against the recorded hashes (module docstring)."""
    sub = log.subnet(subnet)
    base = max((h for h in sub.checkpoint_heights() if h <= height), default=0)
    # only the batches above the checkpoint are decoded: the replay reads no others
    batches: list = [None] * base
    try:
        batches += [decode_batch(data) for data in sub.batches[base:height]]
    except CodecError as exc:
        raise ForkError(f"subnet {subnet}: a recorded batch above height {base} does not decode: {exc}") from exc
    state, trees = None, None
    try:
        for h, state, trees in replay_states(sub.genesis, batches, Perturbation(start=base), context,
                                             dict(sub.checkpoints), until=height):
            recorded = sub.hashes[h - 1][1:] if h else None
            if recorded is not None and recorded != (trees.full_hash, trees.certified_root):
                raise ForkError(f"subnet {subnet}: rebuilding height {h} from checkpoint {base} gives another "
                                f"state hash than the run recorded; the run log does not replay")
    except AuditError as exc:
        raise ForkError(f"subnet {subnet}: the state of height {height} cannot be rebuilt: {exc}") from exc
    if state is None or trees is None:   # replay_states yields the start height at least
        raise ForkError(f"subnet {subnet}: nothing to rebuild the state of height {height} from")
    return state, ForkedSubnet(subnet, height, base, height - base, trees.full_hash, trees.certified_root)


def check_streams(states: Mapping[str, ReplicatedState]) -> None:
    """``ForkInconsistent`` unless every ordered pair of the chosen states agrees on the
    messages between them (module docstring)."""
    for sender, state in sorted(states.items()):
        for receiver, other in sorted(states.items()):
            if receiver == sender:
                continue
            out = state.streams.get(receiver)
            begin, end = (out.begin, out.end) if out is not None else (0, 0)
            back = other.streams.get(sender)
            inducted = back.signals_end if back is not None else 0
            if inducted > end:
                raise ForkInconsistent(
                    f"{receiver} at height {other.metadata.batch_number} has inducted {inducted} messages of "
                    f"{sender}'s stream, but {sender} at height {state.metadata.batch_number} had sent only {end}: "
                    f"fork {sender} at a later height or {receiver} at an earlier one (--at {sender}=HEIGHT), "
                    f"or the others at the moment of one (--align)")
            if inducted < begin:
                raise ForkInconsistent(
                    f"{sender} at height {state.metadata.batch_number} has dropped its stream to {receiver} "
                    f"below index {begin}, but {receiver} at height {other.metadata.batch_number} had inducted "
                    f"only {inducted}: fork {receiver} at a later height or {sender} at an earlier one, "
                    f"or the others at the moment of one (--align)")


def _batch_time(log: RunLog, subnet: str, height: int) -> int:
    try:
        return decode_batch(log.subnet(subnet).batches[height - 1]).time
    except CodecError as exc:
        raise ForkError(f"subnet {subnet}: the recorded batch of height {height} does not decode: {exc}") from exc


def aligned_heights(log: RunLog, at: Mapping[str, int]) -> dict[str, int]:
    """``at`` with every subnet it does not name at the same moment as the first it names:
    the highest height whose block time is at most that height's block time (block times
    only grow, so a binary search over a few recorded batches finds it). Subnets make heights
    at their own pace; the states of one moment agree on the messages between them."""
    if not at:
        raise ForkError("aligning needs one subnet's height to align the others with")
    unknown = sorted(set(at) - set(log.subnet_ids()))
    if unknown:
        raise ForkError(f"no subnet {', '.join(unknown)} in the run; its subnets are {', '.join(log.subnet_ids())}")
    for subnet, height in at.items():
        _check_height(log, subnet, height)
    anchor = sorted(at)[0]
    moment = _batch_time(log, anchor, at[anchor])
    heights = dict(at)
    for subnet in log.subnet_ids():
        if subnet in heights:
            continue
        low, high = 0, log.subnet(subnet).height   # invariant: the time at low is <= moment (0: genesis)
        while low < high:
            middle = (low + high + 1) // 2
            if _batch_time(log, subnet, middle) <= moment:
                low = middle
            else:
                high = middle - 1
        if low == 0:
            raise ForkError(f"subnet {subnet} had executed no height when {anchor} executed {at[anchor]}")
        heights[subnet] = low
    return heights


def _covers(log: RunLog, at: int | Mapping[str, int]) -> bool:
    if type(at) is not int and not isinstance(at, Mapping):
        return True   # fork_heights refuses it, whichever record is read
    wanted = {s: at for s in log.subnet_ids()} if type(at) is int else dict(at)
    return all(s in log.subnet_ids() and log.subnet(s).height >= h for s, h in wanted.items())


def _recorded_run(layout: TestnetLayout, manifest: dict, registry: Registry, at: int | Mapping[str, int]) -> RunLog:
    """What ``source`` recorded (module docstring): its run log ``DIR/run`` if it reaches the
    heights asked for, else what its nodes record while they run — per subnet the executed log
    (from genesis) of the node that executed the most, with the checkpoints any of its nodes
    keeps, each verified against its digest. Nothing is written: a running node's log is read
    up to its last complete record."""
    earlier = load_run_log(layout.run) if layout.run.is_dir() else None
    if earlier is not None and _covers(earlier, at):
        return earlier
    subnets = []
    for record in registry.latest().subnets:
        best: list = []
        # the checkpoints of a run log written at an earlier stop, every few heights, are as good
        checkpoints: dict[int, bytes] = {} if earlier is None or record.subnet_id not in earlier.subnet_ids() \
            else dict(earlier.subnet(record.subnet_id).checkpoints)
        for node in record.node_ids:
            files = layout.node_files(node)
            if files.executed_log.exists():
                entries = read_executed_log(files.executed_log)
                if entries and entries[0][0] == 1 and len(entries) > len(best):
                    best = entries
            heights = [int(p.name) for p in files.checkpoints.glob("*") if p.is_dir() and p.name.isdigit()]
            for height in heights:
                try:   # a running node may delete an old one meanwhile: then it is not used
                    checkpoints.setdefault(height, read_checkpoint_bytes(files.checkpoints / f"{height:020d}", height)[1])
                except CorruptCheckpoint:
                    continue
        if not best:
            raise ForkError(f"no node of {record.subnet_id} in {layout.root} holds its executed log from genesis, "
                            f"and {layout.run} does not reach the height asked for")
        status = layout.read_json(layout.status(record.subnet_id)) or {}
        certified = status.get("certified_height") if layout.pid("launcher").exists() else None
        if isinstance(certified, int):   # a running testnet: only certified heights
            best = best[:max(certified - best[0][0] + 1, 0)]
        subnets.append(SubnetLog(record.subnet_id, layout.genesis(record.subnet_id).read_bytes(),
                                 tuple(e[1] for e in best), tuple((e[0], e[2], e[3]) for e in best),
                                 tuple(sorted((h, d) for h, d in checkpoints.items() if h <= len(best)))))
    limits = layout.limits(manifest)
    return RunLog(tuple(sorted(subnets, key=lambda s: s.subnet_id)), tuple(manifest["canister_modules"]),
                  limits_preset_name(limits), limits, 1, tuple(r.topology() for r in registry.records))


def fork_base_hash(subnet: str, height: int, full_hash: bytes, subnet_key: bytes) -> bytes:
    """The block hash the fork's chain of ``subnet`` continues from: of its own (the source's
    block is not the parent of a block signed by other keys), fixed by the forked state and the
    fork's subnet key."""
    return hashlib.sha256(_BASE_DOMAIN + subnet.encode() + height.to_bytes(8, "big") + full_hash
                          + subnet_key).digest()


def _check_target(source: Path, target: Path) -> None:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ForkError(f"{target} exists and is not an empty directory; a fork never writes over anything")
    src, dst = source.resolve(), target.resolve()
    if dst == src or src in dst.parents:
        raise ForkError(f"{target} lies inside the source {source}; a fork never writes into its source")


def _fork_registry(registry: Registry, version: int, nodes: int | None, seed: bytes):
    """The source's versions up to ``version``, then ``version + 1``: the same subnets, routing
    table and migrations with new nodes and keys (module docstring); and the nodes' secrets."""
    try:
        current = registry.record(version)
    except RegistryError as exc:
        raise ForkError(f"the source's registry has no version {version}: {exc}") from exc
    specs = [SubnetSpec(s.subnet_id, nodes if nodes is not None else s.size, ()) for s in current.subnets]
    not_before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    try:
        fresh, secrets = genesis_registry(specs, seed, not_before=not_before, version=version + 1)
        record = replace(fresh.latest(), routing_table=current.routing_table,
                         canister_migrations=current.canister_migrations)
        return Registry([r for r in registry.records if r.version <= version] + [record]), secrets
    except (GenesisError, RegistryError) as exc:
        raise ForkError(f"the fork's registry cannot be made: {exc}") from exc


def fork_testnet(source: Path | str, at: int | Mapping[str, int], target: Path | str, *, nodes: int | None = None,
                 align: bool = False, progress: Progress | None = None) -> ForkReport:
    """Write the fork of ``source`` at ``at`` into ``target`` (module docstring); it is started
    by ``replica testnet up --dir TARGET`` like any stopped testnet. ``nodes``: per subnet
    (default: as many as the source's subnets had). ``align``: the subnets ``at`` does not
    name fork at the moment of the first it names (``aligned_heights``)."""
    started = time.monotonic()
    source, target = Path(source), Path(target)
    layout = TestnetLayout(source)
    _check_target(source, target)
    manifest = layout.read_manifest()
    if nodes is not None and (type(nodes) is not int or nodes < 1):
        raise ForkError(f"a subnet of the fork needs at least one node, not {nodes!r}")
    try:
        registry = decode_registry(layout.registry.read_bytes())
        log = _recorded_run(layout, manifest, registry, at)
        context = context_for(log)
    except (AuditError, RegistryError, NodeStoreError, OSError) as exc:
        raise ForkError(f"the recorded run of {source} cannot be read: {exc}") from exc
    if align:
        if type(at) is int:   # one height: the first subnet's
            at = {log.subnet_ids()[0]: at}
        at = aligned_heights(log, at) if isinstance(at, Mapping) else at
    heights = fork_heights(log, at)
    progress = progress or Progress("fork", quiet=True)
    stage = progress.child(f"fork {source} into {target}", total=len(heights))
    states: dict[str, ReplicatedState] = {}
    forked: list[ForkedSubnet] = []
    for done, (subnet, height) in enumerate(sorted(heights.items()), start=1):
        state, info = _state_at(log, subnet, height, context)
        states[subnet], forked = state, forked + [info]
        stage.update(f"{subnet} at height {height}: checkpoint {info.checkpoint_height} + {info.replayed} blocks",
                     done=done)
    check_streams(states)
    version = max(s.metadata.network_topology.registry_version for s in states.values())
    seed = os.urandom(32)   # the fork's threshold keys: its own, unknown to the source
    fork_registry, secrets = _fork_registry(registry, version, nodes, seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}.forking-", dir=target.parent))
    try:
        _write(building, layout, manifest, log, fork_registry, secrets, states, forked, seed, source, version)
        if target.exists():
            target.rmdir()   # empty (checked above): the rename puts the whole fork in its place
        os.rename(building, target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    stage.finish(f"{len(forked)} subnets")
    members = fork_registry.latest().subnets
    return ForkReport(source, target, tuple(forked), version + 1, members[0].size, time.monotonic() - started)


def _write(root: Path, source_layout: TestnetLayout, manifest: dict, log: RunLog, registry: Registry, secrets: dict,
           states: Mapping[str, ReplicatedState], forked: list[ForkedSubnet], seed: bytes, source: Path,
           version: int) -> None:
    layout = TestnetLayout(root)
    latest = registry.latest()
    by_subnet = {f.subnet_id: f for f in forked}
    for subnet in log.subnet_ids():
        write_atomically(layout.genesis(subnet), log.subnet(subnet).genesis)
    for node_id, node_secrets in secrets.items():
        write_atomically(layout.secrets(node_id), encode_node_secrets(node_secrets), mode=0o600)
    write_atomically(layout.registry, encode_registry(registry))
    defaults = NodeProcessConfig(testnet_dir=str(root), node_id="-", subnet_id="-")
    for record in latest.subnets:
        info, state = by_subnet[record.subnet_id], states[record.subnet_id]
        sub = log.subnet(record.subnet_id)
        base = ChainBase(info.height, fork_base_hash(record.subnet_id, info.height, info.full_hash, record.public_key))
        for node_id in record.node_ids:
            files = layout.node_files(node_id)
            NodeCheckpoints(files.checkpoints, files.certifications, interval=defaults.checkpoint_interval,
                            keep=defaults.checkpoints_kept).write(info.height, state, info.full_hash)
            replace_block_log(files.blocks, base).close()
            executed = ExecutedLog(files.executed_log)
            try:
                for (height, full, root_hash), batch in zip(sub.hashes[:info.height], sub.batches):
                    executed.record(height, batch, full, root_hash)
            finally:
                executed.close()
    layout.write_json(layout.manifest, {
        **manifest,
        "subnets": list(log.subnet_ids()),
        "nodes": latest.subnets[0].size,
        "seed": seed.hex(),
        "process_model": "node",
        "fork": {"source": str(source.resolve()), "heights": {f.subnet_id: f.height for f in forked},
                 "source_registry_version": version},
    })


def started_states(directory: Path | str) -> dict[str, tuple[str, int, str]]:
    """``{node: (subnet, height, full state hash hex)}``: the state each running node of the
    testnet in ``directory`` started from (its ``status.json``'s ``started_at``), for nodes
    that have written one."""
    layout = TestnetLayout(Path(directory))
    started = {}
    for record in decode_registry(layout.registry.read_bytes()).latest().subnets:
        for node in record.node_ids:
            status = layout.read_json(layout.node_files(node).status) or {}
            at = status.get("started_at")
            if isinstance(at, list) and len(at) == 2:
                started[node] = (record.subnet_id, int(at[0]), str(at[1]))
    return started
