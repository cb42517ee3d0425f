"""The inputs of ``replica trace`` from a testnet directory (shell): every subnet's genesis
state and block log (read-only: a running subnet keeps appending), the registry, the
canister classes and limits of the manifest, and the round time; replayed into
``Timeline``s (``replica.observe.call_events``) with a progress line per subnet."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from consensus_stub.block_store import BlockStoreError, read_block_log
from consensus_stub.registry import RegistryError, decode_registry
from replica.execution import ExecutionEnvironment
from replica.node.batch_processor import canister_classes
from replica.progress import Progress

from .call_events import Timeline, collect_events
from replica.testnet.launcher import LIMIT_PRESETS, TestnetError, TestnetLayout

__all__ = ["testnet_timelines"]


def testnet_timelines(directory: Path | str, watch: Iterable[bytes], *,
                      quiet: bool = False) -> tuple[dict[str, Timeline], float]:
    """``({subnet: Timeline}, round seconds)`` of the testnet in ``directory``."""
    layout = TestnetLayout(Path(directory))
    manifest = layout.read_manifest()
    try:
        registry = decode_registry(layout.registry.read_bytes())
    except (OSError, RegistryError) as exc:
        raise TestnetError(f"{layout.root} holds no readable registry: {exc}") from exc
    executor = ExecutionEnvironment(canister_classes(manifest["canister_modules"]))
    limits = LIMIT_PRESETS[manifest["limits"]]
    watch = list(watch)
    timelines = {}
    for subnet in manifest["subnets"]:
        path = layout.blocks(subnet)
        try:
            blocks = read_block_log(path) if path.exists() else []
        except BlockStoreError as exc:
            raise TestnetError(f"cannot read the block log of {subnet}: {exc}") from exc
        progress = Progress(f"replaying the blocks of {subnet}", len(blocks), quiet=quiet)
        timelines[subnet] = collect_events(
            subnet, layout.genesis(subnet).read_bytes(), blocks, registry, executor, limits, watch=watch,
            on_height=lambda h, p=progress: p.update(done=h))
        progress.finish()
    return timelines, float(manifest["tick_s"])
