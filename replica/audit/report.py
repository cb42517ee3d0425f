"""The audit report: one JSON-ready dict, rendered as terminal text and as an HTML page.

``build_report`` assembles the collected facts (pure); ``render_text`` and ``render_html``
turn a report into text (pure). The verdict is ``agree`` — exit status 0 — only when every
replica reported every height it should, no replay failed, all replicas agree at every
height, the majority equals the hashes the live run recorded, and every replica was replayed
by the build the live run recorded (when it recorded one); otherwise ``divergent`` when the
hashes say so, else ``other-build`` (exit status 1 for both). Everything that depends on where and how fast the audit ran lives under
``environment``, so two runs of one audit on different clusters compare equal without it.
"""

from __future__ import annotations

import html
import shlex
from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["AuditFacts", "build_report", "render_text", "render_html", "reproduce_command", "REPORT_VERSION",
           "comparable"]

REPORT_VERSION = 2
MAX_LISTED = 50
_COLORS = ("#d62728", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _hex(value: bytes | bytearray | None) -> str | None:
    return None if value is None else bytes(value).hex()


@dataclass
class AuditFacts:
    """What the job collected (plain Python values; hashes as bytes)."""

    source: str
    subnets: list[dict]                       # {subnet, batches, checkpoints}
    canister_modules: list[str]
    limits: str
    replicas: int
    seed: int
    worker_hash_seed: int
    from_genesis: bool
    faults: list[str]                         # "replica:fault"
    perturbation_counts: dict[str, int]
    replica_batches: int
    rows: int
    error_rows: int
    per_height: list[tuple]                   # (subnet, height, reporting, divergent)
    split_groups: list[tuple]                 # (subnet, height, full, root, error, replicas, is_majority)
    clusters: list[dict]                      # from analysis.clusters, plus drilldown/reproduce
    recorded_mismatches: list[tuple]          # (subnet, height, majority_full, majority_root, recorded_full, recorded_root)
    incomplete: list[tuple]                   # (replica, subnet, expected, reported)
    divergent_replicas: int
    build: dict[str, Any] = field(default_factory=dict)       # build_check.compare_builds
    environment: dict[str, Any] = field(default_factory=dict)


def reproduce_command(run_dir: str, subnet: str, perturbation: str, height: int, against: str | None,
                      worker_hash_seed: int) -> str:
    """``replica replay-one …``: replays one replica locally (its hash seed included)."""
    words = ["replica", "replay-one", run_dir, "--subnet", subnet, "--perturbation", perturbation,
             "--until", str(height), "--worker-hash-seed", str(worker_hash_seed)]
    if against is not None:
        words += ["--against", against]
    return " ".join(shlex.quote(w) for w in words)


def _groups(split_groups: list[tuple], recorded: dict) -> list[dict]:
    by_key: dict[tuple, list[tuple]] = {}
    for subnet, height, full, root, error, replicas, is_majority in split_groups:
        by_key.setdefault((subnet, height), []).append((full, root, error, replicas, is_majority))
    out = []
    for (subnet, height) in sorted(by_key)[:MAX_LISTED * 4]:
        live = recorded.get((subnet, height))
        groups = sorted(by_key[(subnet, height)], key=lambda g: (-g[3], _hex(g[0]) or "", g[2] or ""))
        out.append({
            "subnet": subnet, "height": height, "reporting": sum(g[3] for g in groups),
            "groups": [{"full_hash": _hex(f), "certified_root": _hex(r), "error": e, "replicas": n,
                        "majority": bool(m), "recorded": live is not None and (f, r) == live}
                       for f, r, e, n, m in groups],
        })
    return out


def build_report(facts: AuditFacts, recorded: dict[tuple[str, int], tuple[bytes, bytes]]) -> dict[str, Any]:
    """The report (module docstring) of an audit; ``recorded`` maps (subnet, height) → live hashes."""
    divergent_rows = sum(d for _, _, _, d in facts.per_height)
    clusters = sorted(facts.clusters, key=lambda c: (c["first_height"], c["subnet"], c["replicas"][0]))
    first = min(((c["first_height"], c["subnet"]) for c in clusters), default=None)
    clean = (not divergent_rows and not facts.error_rows and not facts.incomplete and not facts.recorded_mismatches)
    other_build = facts.build.get("other_build_replicas", 0)
    verdict = "divergent" if not clean else ("other-build" if other_build else "agree")
    heights: dict[str, dict] = {}
    for subnet, height, reporting, _ in facts.per_height:
        entry = heights.setdefault(subnet, {"first": height, "last": height, "reported": 0, "min_replicas": reporting})
        entry["first"] = min(entry["first"], height)
        entry["last"] = max(entry["last"], height)
        entry["reported"] += 1
        entry["min_replicas"] = min(entry["min_replicas"], reporting)
    listed = []
    for number, c in enumerate(clusters[:MAX_LISTED]):
        listed.append({
            "id": number, "subnet": c["subnet"], "first_height": c["first_height"], "size": c["size"],
            "replicas": list(c["replicas"][:MAX_LISTED]), "shared_perturbation": list(c["shared_kinds"]),
            "perturbations": list(c["perturbations"][:10]), "full_hash": _hex(c["full_hash"]),
            "certified_root": _hex(c["certified_root"]), "error": c["error"],
            "majority_replica": c.get("majority_replica"), "drilldown": c.get("drilldown"),
            "reproduce": c.get("reproduce"),
        })
    return {
        "format": "replica-audit-report",
        "version": REPORT_VERSION,
        "verdict": verdict,
        "exit_status": 0 if verdict == "agree" else 1,
        "run": {"source": facts.source, "subnets": facts.subnets, "canister_modules": facts.canister_modules,
                "limits": facts.limits},
        "audit": {"replicas": facts.replicas, "seed": facts.seed, "worker_hash_seed": facts.worker_hash_seed,
                  "from_genesis": facts.from_genesis, "faults": facts.faults,
                  "perturbations": dict(sorted(facts.perturbation_counts.items())),
                  "replica_batches": facts.replica_batches, "rows": facts.rows},
        "heights": dict(sorted(heights.items())),
        "summary": {
            "divergent_replicas": facts.divergent_replicas, "divergent_rows": divergent_rows,
            "error_rows": facts.error_rows, "incomplete_replicas": len(facts.incomplete),
            "recorded_mismatches": len(facts.recorded_mismatches),
            "split_heights": sum(1 for _, _, _, d in facts.per_height if d), "clusters": len(clusters),
            "other_build_replicas": other_build,
        },
        "build": facts.build,
        "first_divergence": None if first is None else {"subnet": first[1], "height": first[0]},
        "hash_groups": _groups(facts.split_groups, recorded),
        "divergent_per_height": [{"subnet": s, "height": h, "reporting": r, "divergent": d}
                                 for s, h, r, d in sorted(facts.per_height)],
        "clusters": listed,
        "clusters_more": max(0, len(clusters) - MAX_LISTED),
        "recorded": {
            "agree": not facts.recorded_mismatches,
            "mismatches": [{"subnet": s, "height": h, "majority_full": _hex(mf), "majority_root": _hex(mr),
                            "recorded_full": _hex(rf), "recorded_root": _hex(rr)}
                           for s, h, mf, mr, rf, rr in sorted(facts.recorded_mismatches)[:MAX_LISTED]],
        },
        "incomplete": [{"replica": r, "subnet": s, "expected_rows": e, "reported_rows": n}
                       for r, s, e, n in sorted(facts.incomplete)[:MAX_LISTED]],
        "environment": facts.environment,
    }


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without ``environment`` (master, timing, partitions): what two runs of the
    same audit must agree on."""
    return {k: v for k, v in report.items() if k != "environment"}


# -- text ---------------------------------------------------------------------------------------

def _short(value: str | None) -> str:
    return "-" if value is None else value[:12]


def render_text(report: dict[str, Any]) -> str:
    """The terminal summary."""
    audit, summary = report["audit"], report["summary"]
    lines = [
        f"verdict: {report['verdict'].upper()}",
        f"run: {report['run']['source']}  subnets: {len(report['run']['subnets'])}  "
        f"limits: {report['run']['limits']}",
        f"replicas: {audit['replicas']}  replica-batches executed: {audit['replica_batches']}  "
        f"rows: {audit['rows']}  perturbations: "
        + ", ".join(f"{k}={v}" for k, v in audit["perturbations"].items()),
    ]
    for subnet, h in report["heights"].items():
        lines.append(f"  {subnet}: heights {h['first']}..{h['last']}, at least {h['min_replicas']} replicas per height")
    lines.append(f"divergent replicas: {summary['divergent_replicas']}  divergent rows: {summary['divergent_rows']}  "
                 f"failed rows: {summary['error_rows']}  incomplete replicas: {summary['incomplete_replicas']}")
    lines += build_lines(report.get("build") or {})
    recorded = report["recorded"]
    lines.append("agreement with the live run's hashes: " + ("yes" if recorded["agree"] else
                 f"NO at {summary['recorded_mismatches']} heights"))
    for m in recorded["mismatches"][:5]:
        lines.append(f"  {m['subnet']} h{m['height']}: majority {_short(m['majority_full'])} "
                     f"live {_short(m['recorded_full'])}")
    if not summary["split_heights"]:
        lines.append("hash groups: exactly one at every reported (subnet, height)")
    if report["first_divergence"]:
        fd = report["first_divergence"]
        lines.append(f"first divergence: {fd['subnet']} at height {fd['height']}")
    for group in report["hash_groups"][:8]:
        parts = ", ".join(
            f"{_short(g['full_hash']) if g['error'] is None else 'error'}×{g['replicas']}"
            + (" (majority)" if g["majority"] else "") + (" (live)" if g["recorded"] else "")
            for g in group["groups"][:6])
        lines.append(f"  hash groups {group['subnet']} h{group['height']}: {parts}")
    for c in report["clusters"][:10]:
        shared = "+".join(c["shared_perturbation"]) or "nothing in common"
        lines.append(f"cluster {c['id']}: {c['size']} replica(s) of {c['subnet']} diverge at height "
                     f"{c['first_height']}; shared perturbation: {shared}; replicas "
                     + ", ".join(map(str, c["replicas"][:10])) + (" …" if c["size"] > 10 else ""))
        if c["error"]:
            lines.append(f"  replay failed: {c['error']}")
        drill = c.get("drilldown")
        if drill:
            for note in drill["notes"]:
                lines.append(f"  note: {note}")
            for p in drill["paths"][:8]:
                lines.append(f"  {p['path']}: {_value(p['minority'])}  (majority: {_value(p['majority'])})")
            if len(drill["paths"]) > 8 or drill["more_paths"]:
                lines.append(f"  … {len(drill['paths']) - 8 + drill['more_paths']} more differing paths")
            executed = drill.get("messages")
            if executed:
                lines.append(f"  executed at height {executed['height']}: {executed['count']} message(s)" + (
                    ": " + "; ".join(f"#{m['index']} {m['kind']} from {m['from']} to {m.get('receiver')} "
                                     f"{m.get('method', '')}" for m in executed["listed"][:5]) if executed["listed"] else ""))
        if c.get("reproduce"):
            lines.append(f"  reproduce: {c['reproduce']}")
    if report["clusters_more"]:
        lines.append(f"… and {report['clusters_more']} more clusters")
    return "\n".join(lines)


def build_lines(build: dict[str, Any]) -> list[str]:
    """What the report says about the builds that replayed the run."""
    if not build:
        return []
    if build["recorded"] is None:
        return [f"build: {build['note']}"]
    compiled = len(build["recorded_compiled"] or [])
    if build["agree"]:
        return [f"build: every replica replayed the live run's build {build['recorded'][:12]} "
                f"({build['recorded_python']}, {compiled} compiled modules)"]
    lines = [f"BUILD MISMATCH: {build['other_build_replicas']} replica(s) replayed another build than the live "
             f"run's {build['recorded'][:12]}"]
    for entry in build["replayed"]:
        if entry["recorded"] or entry["build"] is None:
            continue
        lines.append(f"  build {entry['build'][:12]}: {entry['replicas']} replica(s), e.g. "
                     + ", ".join(map(str, entry["sample"][:10])))
        for difference in entry["differences"][:8] or ["(no details: no executor described this build)"]:
            lines.append(f"    {difference}")
    return lines


def _value(value: Any, width: int = 70) -> str:
    text = "absent" if value is None else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


# -- html ---------------------------------------------------------------------------------------

def _chart(per_height: Sequence[dict], width: int = 760, height: int = 220) -> str:
    """Stacked bars of divergent replicas per height, one color per subnet (inline SVG)."""
    subnets = sorted({p["subnet"] for p in per_height})
    heights = sorted({p["height"] for p in per_height})
    if not heights:
        return "<p>No rows.</p>"
    totals: dict[int, int] = {}
    for p in per_height:
        totals[p["height"]] = totals.get(p["height"], 0) + p["divergent"]
    peak = max(max(totals.values()), 1)
    left, bottom, top = 40, 24, 10
    plot_w, plot_h = width - left - 10, height - bottom - top
    bar = plot_w / max(len(heights), 1)
    index = {h: i for i, h in enumerate(heights)}
    stacked: dict[int, float] = {}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="divergent replicas per height">',
             f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>',
             f'<text x="{left - 4}" y="{top + 8}" text-anchor="end" font-size="10">{peak}</text>',
             f'<text x="{left - 4}" y="{top + plot_h}" text-anchor="end" font-size="10">0</text>']
    for p in sorted(per_height, key=lambda p: (p["height"], p["subnet"])):
        if not p["divergent"]:
            continue
        h = p["divergent"] / peak * plot_h
        y0 = stacked.get(p["height"], 0.0)
        x = left + index[p["height"]] * bar
        color = _COLORS[subnets.index(p["subnet"]) % len(_COLORS)]
        parts.append(f'<rect x="{x:.1f}" y="{top + plot_h - y0 - h:.1f}" width="{max(bar - 1, 1):.1f}" '
                     f'height="{h:.1f}" fill="{color}"><title>{html.escape(p["subnet"])} height {p["height"]}: '
                     f'{p["divergent"]} of {p["reporting"]} divergent</title></rect>')
        stacked[p["height"]] = y0 + h
    for h in heights[:: max(1, len(heights) // 10)]:
        x = left + index[h] * bar + bar / 2
        parts.append(f'<text x="{x:.1f}" y="{height - 8}" text-anchor="middle" font-size="10">{h}</text>')
    if not any(totals.values()):
        parts.append(f'<text x="{left + plot_w / 2:.0f}" y="{top + plot_h / 2:.0f}" text-anchor="middle" '
                     'font-size="13">no replica diverged at any height</text>')
    parts.append("</svg>")
    legend = " ".join(f'<span style="color:{_COLORS[i % len(_COLORS)]}">■</span> {html.escape(s)}'
                      for i, s in enumerate(subnets))
    return "".join(parts) + f"<div class='legend'>{legend}</div>"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: dict[str, Any]) -> str:
    """A self-contained page: verdict, summary, chart, hash groups, clusters with drill-downs."""
    verdict = report["verdict"]
    color = "#2ca02c" if verdict == "agree" else "#d62728"
    summary = report["summary"]
    audit = report["audit"]
    sections = [
        f"<h1>Determinism audit <span class='verdict' style='background:{color}'>{verdict.upper()}</span></h1>",
        f"<p>Run <code>{html.escape(report['run']['source'])}</code>: {len(report['run']['subnets'])} subnets, "
        f"{audit['replicas']} replicas, {audit['replica_batches']} replica-batches executed, "
        f"{audit['rows']} rows.</p>",
        _table(["divergent replicas", "divergent rows", "failed rows", "incomplete replicas",
                "heights off the live run", "clusters"],
               [[summary["divergent_replicas"], summary["divergent_rows"], summary["error_rows"],
                 summary["incomplete_replicas"], summary["recorded_mismatches"], summary["clusters"]]]),
        "<h2>Build</h2>", "".join(f"<p>{html.escape(line)}</p>" for line in build_lines(report.get("build") or {})),
        "<h2>Divergent replicas per height</h2>", _chart(report["divergent_per_height"]),
        "<h2>Perturbations</h2>", _table(["kind", "replicas"], list(audit["perturbations"].items())),
        "<h2>Heights</h2>",
        _table(["subnet", "first", "last", "min replicas per height"],
               [[s, h["first"], h["last"], h["min_replicas"]] for s, h in report["heights"].items()]),
    ]
    if report["hash_groups"]:
        rows = []
        for group in report["hash_groups"][:100]:
            for g in group["groups"]:
                rows.append([group["subnet"], group["height"], g["full_hash"] or f"error: {g['error']}",
                             g["certified_root"] or "", g["replicas"], "yes" if g["majority"] else "",
                             "yes" if g["recorded"] else ""])
        sections += ["<h2>Hash groups at split heights</h2>",
                     _table(["subnet", "height", "full hash", "certified root", "replicas", "majority", "live"], rows)]
    if not report["recorded"]["agree"]:
        sections += ["<h2>Heights where the majority differs from the live run</h2>",
                     _table(["subnet", "height", "majority", "live"],
                            [[m["subnet"], m["height"], m["majority_full"], m["recorded_full"]]
                             for m in report["recorded"]["mismatches"]])]
    for c in report["clusters"]:
        sections.append(f"<h2>Cluster {c['id']}: {c['size']} replica(s) of {html.escape(c['subnet'])} from height "
                        f"{c['first_height']}</h2>")
        sections.append(f"<p>Shared perturbation: <b>{html.escape('+'.join(c['shared_perturbation']) or 'none in common')}"
                        f"</b>. Replicas: {html.escape(', '.join(map(str, c['replicas'])))}</p>")
        if c["error"]:
            sections.append(f"<p>Replay failed: <code>{html.escape(c['error'])}</code></p>")
        drill = c.get("drilldown")
        if drill:
            for note in drill["notes"]:
                sections.append(f"<p><i>{html.escape(note)}</i></p>")
            sections.append(_table(["path", "minority", "majority"],
                                   [[p["path"], _value(p["minority"], 200), _value(p["majority"], 200)]
                                    for p in drill["paths"]]))
            executed = drill.get("messages")
            if executed:
                sections.append(f"<p>Executed at height {executed['height']}: {executed['count']} message(s)</p>")
                sections.append(_table(["index", "from", "kind", "sender", "receiver", "method", "payload bytes"],
                                       [[m["index"], m["from"], m["kind"], m.get("sender"), m.get("receiver"),
                                         m.get("method"), m.get("payload_bytes", "")] for m in executed["listed"]]))
        if c.get("reproduce"):
            sections.append(f"<p>Reproduce: <code>{html.escape(c['reproduce'])}</code></p>")
    style = ("body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:.5em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;font-family:monospace;text-align:left}"
             ".verdict{color:white;padding:2px 10px;border-radius:4px}.legend{font-size:12px}")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Determinism audit</title>"
            f"<style>{style}</style></head><body>" + "\n".join(sections) + "</body></html>\n")
