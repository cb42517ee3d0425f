"""The testnet's live status page (shell): aiohttp on 127.0.0.1, in a thread of the launcher.

``StatusPage(directory).start()`` binds a free port and returns the URL (the launcher writes
it to ``DIR/status-page.url``; ``replica testnet up`` prints it). The page is one
self-contained HTML document whose script refreshes itself every ``REFRESH_MS``:

* ``GET /api/view``: ``replica testnet status``'s certified view (``stream_status``), and the
  recent calls: the ingress of the last blocks of every subnet, each with its status read
  from certified state (one verified ``read_state`` per subnet);
* ``GET /api/trace?id=<hex>``: ``replica trace``'s JSON of one message.

It shows the subnets and their heights, a picture of the streams between subnets with their
backlogs, the recent calls, and a trace view for a message id (a form; a click on a recent
call fills it). Everything is read from the directory (registry, endpoints, block logs), so
the page starts before the subnets do and shows them as they come up.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aiohttp import web

from consensus_stub.block_store import BlockStoreError, read_block_log
from replica.audit.live_status import describe_live_status, read_live_status
from replica.errors import ReplicaError
from replica.ic.textual_ids import canister_text
from replica.node.app_thread import AppThread

from replica.testnet.certification_status import certification_problems
from replica.testnet.launcher import TestnetLayout
from .stream_status import StatusError, StatusReader, reader_for_testnet

__all__ = ["REFRESH_MS", "RECENT_CALLS", "StatusPage", "page_url_path", "status_page_url"]

_log = logging.getLogger(__name__)

REFRESH_MS = 1000
#: Calls listed under "recent calls" (the newest ingress of all subnets).
RECENT_CALLS = 20


def page_url_path(directory: Path | str) -> Path:
    """Where the launcher writes the page's URL."""
    return Path(directory) / "status-page.url"


def status_page_url(directory: Path | str, wait_s: float = 5.0) -> str | None:
    """The URL of the running testnet's page (waiting up to ``wait_s`` for the launcher to write it)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return page_url_path(directory).read_text().strip() or None
        except OSError:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)


class StatusPage:
    """The page of the testnet in ``directory`` (module docstring)."""

    def __init__(self, directory: Path | str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.layout = TestnetLayout(Path(directory))
        self.host, self.port = host, port
        self.url: str | None = None
        self._reader: StatusReader | None = None
        self._reader_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="status-page")
        self._app = AppThread("status-page", self._bind)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> str:
        self.url = f"http://{self.host}:{self._app.start()}/"
        return self.url

    def stop(self) -> None:
        self._app.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._reader is not None:
            self._reader.close()

    async def _bind(self) -> tuple[web.AppRunner, int]:
        app = web.Application()
        app.router.add_get("/", self._page)
        app.router.add_get("/api/view", self._view)
        app.router.add_get("/api/trace", self._trace)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        return runner, runner.addresses[0][1]

    # -- handlers -------------------------------------------------------------------------------

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(text=_PAGE.replace("__REFRESH_MS__", str(REFRESH_MS)), content_type="text/html")

    async def _view(self, request: web.Request) -> web.Response:
        return web.json_response(await asyncio.get_running_loop().run_in_executor(self._pool, self.view))

    async def _trace(self, request: web.Request) -> web.Response:
        text = request.query.get("id", "")
        try:
            message_id = bytes.fromhex(text)
        except ValueError:
            return web.json_response({"error": f"{text!r} is not a hex message id"}, status=400)
        answer = await asyncio.get_running_loop().run_in_executor(self._pool, self.trace, message_id)
        return web.json_response(answer)

    # -- data (on the pool) ---------------------------------------------------------------------

    def _status_reader(self) -> StatusReader | None:
        """A reader once every subnet has published its endpoints (rebuilt if they change)."""
        with self._reader_lock:
            try:
                manifest = self.layout.read_manifest()
                fresh = reader_for_testnet(self.layout.root)
            except ReplicaError:
                return None
            if set(fresh.endpoints) != set(manifest["subnets"]):
                fresh.close()
                return None
            if self._reader is not None and self._reader.endpoints == fresh.endpoints:
                fresh.close()
                return self._reader
            if self._reader is not None:
                self._reader.close()
            self._reader = fresh
            return fresh

    def view(self) -> dict:
        """The JSON of ``/api/view``."""
        # nodes that diverged or see certification stall (their status files; the node model)
        problems = [problem.as_json() for problem in certification_problems(self.layout)]
        reader = self._status_reader()
        if reader is None:
            return {"starting": True, "subnets": [], "streams": [], "recent": [], "certification": problems,
                    "time_ns": time.time_ns()}
        view = reader.view(interval_s=0).as_json()
        view.update(starting=False, recent=self.recent_calls(reader), certification=problems, time_ns=time.time_ns())
        live = read_live_status(self.layout.root)   # a live audit's verdict and lag (replica audit --follow)
        view["live_audit"] = None if live is None else describe_live_status(live)
        return view

    def recent_calls(self, reader: StatusReader) -> list[dict]:
        """The newest ``RECENT_CALLS`` ingress messages of all subnets, with certified statuses."""
        calls = []
        for subnet in reader.subnets:
            try:
                blocks = read_block_log(self.layout.blocks(subnet))
            except (OSError, BlockStoreError):
                continue
            found = 0
            for block in reversed(blocks):   # the newest calls of this subnet, however old
                for ingress in block.ingress:
                    calls.append({"message_id": ingress.message_id.hex(), "subnet": subnet, "height": block.height,
                                  "time_ns": block.time, "canister": canister_text(ingress.receiver),
                                  "method": ingress.method_name})
                    found += 1
                if found >= RECENT_CALLS:
                    break
        calls.sort(key=lambda c: (c["time_ns"], c["message_id"]), reverse=True)
        calls = calls[:RECENT_CALLS]
        for subnet in sorted({c["subnet"] for c in calls}):
            mine = [c for c in calls if c["subnet"] == subnet]
            try:
                statuses, height = reader.request_statuses(subnet, [bytes.fromhex(c["message_id"]) for c in mine])
            except StatusError as exc:
                for call in mine:
                    call["status"] = f"unreadable: {exc}"
                continue
            for call in mine:
                call["status"], call["certified_height"] = statuses[bytes.fromhex(call["message_id"])], height
        return calls

    def trace(self, message_id: bytes) -> dict:
        """The JSON of ``/api/trace``."""
        from .trace import trace_message
        from .trace_source import testnet_timelines

        try:
            timelines, round_s = testnet_timelines(self.layout.root, [message_id], quiet=True)
        except ReplicaError as exc:
            return {"error": str(exc)}
        return trace_message(message_id, timelines, now_ns=time.time_ns(), round_s=round_s).as_json()


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>testnet status</title>
<style>
 body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
 h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.4em; }
 table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: right; border-bottom: 1px solid #ddd;
   white-space: nowrap; } #trace td:last-child { white-space: normal; }
 th { background: #f3f3f3; } td.l, th.l { text-align: left; } .muted { color: #888; } .stuck { color: #b00; }
 #picture svg { border: 1px solid #ddd; background: #fcfcfc; } code { font-size: 12px; }
 tr.call { cursor: pointer; } tr.call:hover { background: #eef; }
</style></head>
<body>
<h1>testnet status <span id="updated" class="muted"></span></h1>
<div id="starting" class="muted"></div>
<div id="live-audit" class="muted"></div>
<div id="certification" class="stuck"></div>
<h2>subnets</h2>
<table id="subnets"><thead><tr><th class="l">subnet</th><th class="l">IC principal</th><th>nodes up</th><th>finalized</th><th>certified</th>
<th>rounds/s</th></tr></thead><tbody></tbody></table>
<h2>streams <span class="muted">(certified state)</span></h2>
<div id="picture"></div>
<table id="streams"><thead><tr><th class="l">stream</th><th>begin</th><th>end</th><th>signals_end</th><th>backlog</th>
<th>oldest (rounds)</th><th>bytes</th><th class="l">reject signals</th></tr></thead><tbody></tbody></table>
<h2>recent calls</h2>
<table id="recent"><thead><tr><th class="l">message id</th><th class="l">subnet</th><th>height</th><th>canister</th>
<th class="l">method</th><th class="l">status</th></tr></thead><tbody></tbody></table>
<h2>trace</h2>
<form id="trace-form"><input id="trace-id" size="70" placeholder="message id (hex)"> <button>trace</button></form>
<div id="trace"></div>
<script>
const REFRESH_MS = __REFRESH_MS__;
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c])); }
function rows(id, list, cells, attrs) {
  document.querySelector('#' + id + ' tbody').innerHTML = list.map(x =>
    '<tr ' + (attrs ? attrs(x) : '') + '>' + cells(x).map(([v, l]) => '<td' + (l ? ' class="l"' : '') + '>' + esc(v) + '</td>').join('') + '</tr>').join('');
}
function picture(subnets, streams) {
  const n = subnets.length, w = 520, h = 300, r = 110, cx = w / 2, cy = h / 2;
  const pos = {};
  subnets.forEach((s, i) => { const a = 2 * Math.PI * i / Math.max(n, 1) - Math.PI / 2;
    pos[s.subnet] = [cx + r * Math.cos(a) * 1.5, cy + r * Math.sin(a)]; });
  let svg = '<svg width="' + w + '" height="' + h + '" viewBox="0 0 ' + w + ' ' + h + '">' +
    '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#468"/></marker></defs>';
  streams.forEach(st => {
    const a = pos[st.source], b = pos[st.destination]; if (!a || !b) return;
    const dx = b[0] - a[0], dy = b[1] - a[1], len = Math.hypot(dx, dy) || 1, nx = -dy / len * 8, ny = dx / len * 8;
    const x1 = a[0] + dx * 0.2 + nx, y1 = a[1] + dy * 0.2 + ny, x2 = a[0] + dx * 0.8 + nx, y2 = a[1] + dy * 0.8 + ny;
    const color = st.backlog > 0 ? '#c60' : '#468';
    svg += '<line class="stream" x1="' + x1 + '" y1="' + y1 + '" x2="' + x2 + '" y2="' + y2 + '" stroke="' + color +
      '" stroke-width="' + (2 + Math.min(6, Math.log2(1 + st.backlog))) + '" marker-end="url(#arrow)"/>' +
      '<text x="' + ((x1 + x2) / 2 + nx) + '" y="' + ((y1 + y2) / 2 + ny * 2) + '" font-size="11" text-anchor="' +
      (nx > 1 ? 'start' : nx < -1 ? 'end' : 'middle') + '">backlog ' +
      st.backlog + '</text>';
  });
  subnets.forEach(s => { const [x, y] = pos[s.subnet];
    svg += '<circle cx="' + x + '" cy="' + y + '" r="34" fill="#e8f0fb" stroke="#468"/>' +
      '<text x="' + x + '" y="' + (y - 2) + '" text-anchor="middle" font-size="12">' + esc(s.subnet) + '</text>' +
      '<text x="' + x + '" y="' + (y + 13) + '" text-anchor="middle" font-size="11" fill="#555">h ' +
      esc(s.certified_height ?? '-') + '</text>'; });
  document.getElementById('picture').innerHTML = svg + '</svg>';
}
async function refresh() {
  try {
    const v = await (await fetch('/api/view')).json();
    document.getElementById('starting').textContent = v.starting ? 'the subnets are starting…' : '';
    document.getElementById('live-audit').textContent = v.live_audit || '';
    document.getElementById('live-audit').className = (v.live_audit || '').includes('DIVERGENT') ? 'stuck' : 'muted';
    document.getElementById('certification').innerHTML = (v.certification || []).map(p =>
      '<div>' + esc(p.node) + ': ' + esc(p.summary) + (p.messages.length ? ' (executed there: ' +
      esc(p.messages.join(', ')) + ')' : '') + '</div>').join('');
    document.getElementById('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    rows('subnets', v.subnets, s => [[s.subnet, 1], [s.principal ?? '-', 1], [s.nodes_up + '/' + s.nodes], [s.finalized_height ?? '-'],
      [s.certified_height ?? '-'], [s.rounds_per_s == null ? '-' : s.rounds_per_s.toFixed(2)]]);
    picture(v.subnets, v.streams);
    rows('streams', v.streams, s => [[s.source + ' \u2192 ' + s.destination, 1], [s.begin], [s.end], [s.signals_end ?? '-'],
      [s.backlog], [s.oldest_unacknowledged_rounds ?? '-'], [s.bytes],
      [Object.entries(s.reject_signals).map(([k, n]) => k + '=' + n).join(' ') || '-', 1]]);
    rows('recent', v.recent, c => [[c.message_id.slice(0, 16) + '\u2026', 1], [c.subnet, 1], [c.height], [c.canister],
      [c.method, 1], [c.status, 1]], c => 'class="call" data-id="' + c.message_id + '"');
    document.querySelectorAll('tr.call').forEach(tr => tr.onclick = () => {
      document.getElementById('trace-id').value = tr.dataset.id; showTrace(); });
  } catch (e) { document.getElementById('starting').textContent = 'the testnet does not answer: ' + e; }
}
async function showTrace() {
  const id = document.getElementById('trace-id').value.trim(); if (!id) return;
  const out = document.getElementById('trace'); out.textContent = 'tracing…';
  const t = await (await fetch('/api/trace?id=' + encodeURIComponent(id))).json();
  if (t.error) { out.textContent = t.error; return; }
  if (!t.found) { out.textContent = 'message ' + id + ' is in no finalized block'; return; }
  out.innerHTML = '<p>status: <b>' + esc(t.status) + '</b></p><table><tbody>' + t.hops.map(h =>
    '<tr class="hop' + (h.kind == 'stuck' ? ' stuck' : '') + '"><td class="l">' + esc(h.subnet) + '</td><td>' + esc(h.height ?? '') +
    '</td><td class="l" style="padding-left:' + (10 + 16 * h.depth) + 'px">' + esc(h.text) + '</td></tr>').join('') + '</tbody></table>';
}
document.getElementById('trace-form').onsubmit = e => { e.preventDefault(); showTrace(); };
const wanted = new URLSearchParams(location.search).get('trace');
if (wanted) { document.getElementById('trace-id').value = wanted; showTrace(); }
refresh(); setInterval(refresh, REFRESH_MS);
</script></body></html>
"""
