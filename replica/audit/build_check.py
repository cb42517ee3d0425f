"""Which builds replayed the run, compared with the build the live run recorded (pure).

``compare_builds`` turns the per-build counts of the replay rows (``analysis.replay_builds``)
and the builds known in detail (the driver's own and what the executors described) into the
report's ``build`` section. A replica replayed by a build other than the recorded one is a
finding of its own (``other_build_replicas``): its hashes may agree, but it did not audit the
code the live run ran. A run log recorded before builds were fingerprinted has nothing to
compare with; the section says so and nothing is flagged.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .build import BuildInfo, build_differences

__all__ = ["compare_builds"]

_NOT_RECORDED = "the run log records no build (recorded before builds were fingerprinted): nothing to compare with"


def compare_builds(recorded: BuildInfo | None, replayed: Sequence[tuple[str | None, int, int, Sequence[int]]],
                   known: Mapping[str, BuildInfo]) -> dict[str, Any]:
    """The report's ``build`` section from ``(fingerprint, replicas, rows, sample replicas)`` per build."""
    entries, other = [], 0
    for fingerprint, replicas, rows, sample in sorted(replayed, key=lambda b: (-b[1], b[0] or "")):
        info = known.get(fingerprint) if fingerprint is not None else None
        same = recorded is not None and fingerprint == recorded.fingerprint
        if recorded is not None and fingerprint is not None and not same:
            other += replicas
        entries.append({
            "build": fingerprint, "replicas": int(replicas), "rows": int(rows), "sample": sorted(sample),
            "recorded": same, "compiled": None if info is None else list(info.compiled),
            "differences": [] if same or recorded is None or info is None else build_differences(recorded, info),
        })
    return {
        "recorded": None if recorded is None else recorded.fingerprint,
        "recorded_python": None if recorded is None else recorded.python,
        "recorded_compiled": None if recorded is None else list(recorded.compiled),
        "replayed": entries,
        "other_build_replicas": other,
        "agree": None if recorded is None else other == 0,
        "note": _NOT_RECORDED if recorded is None else None,
    }
