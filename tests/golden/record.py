"""Print, or record, the current golden vectors (``tests/golden/vectors.json``).

    python -m tests.golden.record            # status of every vector against the committed file
    python -m tests.golden.record --json     # the current entries (and scenario) as JSON
    python -m tests.golden.record --write    # merge the current entries into vectors.json

Use ``--write`` after bumping an encoding's version on purpose: it adds the entry for the new
version and keeps the old ones (set an old entry's ``"decodes"`` to ``false`` if the decoder
no longer accepts it, or delete it if the old version is gone for good). It refuses to
replace the bytes of an existing (name, version) entry — that is an encoding change without
a version bump — unless the vector is unversioned (hash derivations, state roots, the
determinism scenario), which are re-recorded in place. The tests never call this.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
from typing import Optional

from .vectors import GOLDEN_FILE, Vector, all_vectors

SCENARIO_NOTE = "tests.properties.determinism_scenario: record_run() + summary(sim)"


def entry_for(vector: Vector, data: bytes, version: Optional[int]) -> dict:
    return {"name": vector.name, "version": version, "length": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "hex": data.hex(), "decodes": True}


def current_entries() -> list[dict]:
    out = []
    for vector in all_vectors():
        out.append(entry_for(vector, vector.encode(vector.build()), vector.current_version()))
    return out


def current_scenario() -> dict:
    """The determinism scenario's final hashes per subnet and the digest of its printed summary."""
    from tests.properties import determinism_scenario as scenario

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        scenario.main([])
    summary = json.loads(stdout.getvalue())
    return {
        "source": SCENARIO_NOTE,
        "summary_stdout_sha256": hashlib.sha256(stdout.getvalue().encode()).hexdigest(),
        "subnets": {
            subnet: {"height": s["hashes"][-1][0], "full_hash": s["hashes"][-1][1],
                     "certified_root": s["hashes"][-1][2], "state_sha256": s["state_sha256"]}
            for subnet, s in sorted(summary.items())
        },
    }


def _key(entry: dict) -> tuple:
    return (entry["name"], -1 if entry["version"] is None else entry["version"])


def merge(committed: list[dict], current: list[dict]) -> tuple[list[dict], list[str]]:
    """``committed`` plus the current entries; the refusals (changed without a version bump)."""
    by_key = {(e["name"], e["version"]): e for e in committed}
    refused = []
    for entry in current:
        key = (entry["name"], entry["version"])
        old = by_key.get(key)
        if old is not None and old["sha256"] != entry["sha256"] and entry["version"] is not None:
            refused.append(f"{entry['name']} version {entry['version']}: bytes changed without a version bump")
            continue
        if old is not None:
            entry = dict(entry, decodes=old.get("decodes", True))
        by_key[key] = entry
    return sorted(by_key.values(), key=_key), refused


def status(committed: list[dict], current: list[dict]) -> list[str]:
    by_key = {(e["name"], e["version"]): e for e in committed}
    names = {e["name"] for e in current}
    lines = []
    for entry in current:
        old = by_key.get((entry["name"], entry["version"]))
        state = "not recorded" if old is None else ("ok" if old["sha256"] == entry["sha256"] else "CHANGED")
        lines.append(f"{state:12} {entry['name']} (version {entry['version']}) {entry['length']} bytes "
                     f"sha256 {entry['sha256'][:16]}")
    for old in committed:
        if old["name"] not in names:
            lines.append(f"{'unknown':12} {old['name']} (version {old['version']}): no such vector any more")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.golden.record", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the current entries as JSON")
    parser.add_argument("--write", action="store_true", help="merge the current entries into vectors.json")
    args = parser.parse_args(argv)
    current = current_entries()
    committed_file = json.loads(GOLDEN_FILE.read_text()) if GOLDEN_FILE.exists() else {"vectors": []}
    committed = committed_file["vectors"]
    if args.json:
        print(json.dumps({"vectors": current, "scenario": current_scenario()}, indent=1, sort_keys=True))
        return 0
    print("\n".join(status(committed, current)))
    scenario = current_scenario()
    scenario_state = "ok" if committed_file.get("scenario") == scenario else "CHANGED or not recorded"
    print(f"{scenario_state:12} determinism scenario summary sha256 {scenario['summary_stdout_sha256'][:16]}")
    if not args.write:
        return 0
    merged, refused = merge(committed, current)
    if refused:
        print("\nrefusing to write: " + "; ".join(refused), file=sys.stderr)
        print("bump the encoding's VERSION (and keep the old entry if the decoder still accepts it)", file=sys.stderr)
        return 1
    GOLDEN_FILE.write_text(json.dumps({"vectors": merged, "scenario": scenario}, indent=1, sort_keys=True) + "\n")
    print(f"\nwrote {len(merged)} entries to {GOLDEN_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
