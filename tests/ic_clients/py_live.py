"""icp-py-core 2.3.1 against a running testnet's ingress API, printing one JSON document.

Run by hand (the URL may come from ``$IC_INGRESS_URL`` instead)::

    .venv/bin/python -m tests.ic_clients.py_live <ingress URL> --canister <id> --method <name> \\
        --arg <hex> [--query-method <name>] [--query-arg <hex>] [--secret <hex Ed25519 key>]

Each step is reported on its own, as the library does it:

* ``status``: ``Client.status()`` (GET /api/v2/status); its ``root_key`` becomes the key the
  library's certificate code trusts. icp-py-core has no ``fetch_root_key``, and its
  ``Certificate.read_root_key`` returns the module constant ``IC_ROOT_KEY`` (mainnet) whatever
  ``Agent(root_key=...)`` says, so this module sets that constant.
* ``update``: ``Agent.update_raw`` (POST /api/v4/canister/<id>/call, then polling read_state
  of /request_status/<id> on /api/v3), certificates verified. It Candid-decodes every reply,
  so a reply that is not Candid fails there: the ``call`` step does the same call by the
  library's pieces (``sign_request``, ``call_endpoint``, ``request_status_raw``) and keeps the
  raw reply.
* ``query``: ``Agent.query_raw`` (POST /api/v3/canister/<id>/query), once as the library
  defaults (no signature check) and once with ``verify_query_signatures=True`` (node keys from
  read_state of /subnet/<id>/node/<node>/public_key on /api/v3/subnet/<id>/read_state).
* ``request_status``: ``Agent.request_status_raw`` (read_state of /request_status/<id>),
  certificate and its ``/time`` (within the ingress expiry) verified.
* ``tampered``: the same read with one byte of the live node's answer changed on its way to
  the library — the certificate's signature, a leaf of its tree, and (on a subnet other than
  the root) the delegation's certificate — each of which the library must refuse.

BLS verification needs the official ``blst`` binding, which is not on PyPI; when it is not
importable the stand-in over pyblst is used (``blst_standin``) and ``bls`` says so.
Exit status 0 when every step succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import cbor2
from icp_agent import agent as icp_agent
from icp_agent.client import Client
from icp_certificate import certificate as icp_certificate
from icp_identity import Identity
from icp_principal import Principal

from . import blst_standin

TERMINAL = ("replied", "rejected", "done")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def _step(report: dict, name: str, body) -> Any:
    try:
        result = body()
    except Exception as exc:   # noqa: BLE001 - a live report records every failure and goes on
        report[name] = {"ok": False, "error": {"name": type(exc).__name__, "message": str(exc)}}
        return None
    report[name] = {"ok": True, **_jsonable(result)}
    return result


def use_blst() -> str:
    """Which BLS backend the library's certificate code will import."""
    try:
        import blst  # noqa: F401 - the official binding, if someone built it
        return "blst"
    except ImportError:
        sys.modules["blst"] = blst_standin
        return "pyblst stand-in (tests.ic_clients.blst_standin)"


def run(url: str, canister: str, method: str, arg: bytes, *, query_method: str | None = None,
        query_arg: bytes | None = None, secret: bytes | None = None, timeout_s: float = 60.0) -> dict:
    identity = Identity(privkey=secret.hex(), type="ed25519") if secret else Identity(type="ed25519")
    client = Client(url=url)
    report: dict[str, Any] = {"url": url, "principal": identity.sender().to_str(), "canister_id": canister,
                              "bls": use_blst()}

    def status():
        fields = cbor2.loads(client.status())
        icp_certificate.IC_ROOT_KEY = bytes(fields["root_key"])
        return {"root_key": bytes(fields["root_key"]), "fields": sorted(str(k) for k in fields)}
    root = _step(report, "status", status)
    agent = icp_agent.Agent(identity, client, root_key=bytes(root["root_key"]) if root else icp_certificate.IC_ROOT_KEY)

    _step(report, "update", lambda: {"reply": agent.update_raw(canister, method, arg, timeout=timeout_s)})

    def call():
        content = {"request_type": "call", "sender": identity.sender().bytes,
                   "canister_id": Principal.from_str(canister).bytes, "method_name": method, "arg": arg,
                   "ingress_expiry": agent.get_expiry_date()}
        request_id, body = icp_agent.sign_request(content, identity)
        response = agent.call_endpoint(canister, body)
        out: dict[str, Any] = {"request_id": request_id, "http_status": response.status_code}
        try:
            answer = cbor2.loads(response.content)
        except Exception:   # noqa: BLE001 - a 202 has no body
            answer = None
        if isinstance(answer, dict) and "certificate" in answer:
            certificate = icp_certificate.Certificate(cbor2.loads(answer["certificate"]))
            certificate.assert_certificate_valid(canister)
            certificate.verify_cert_timestamp(agent.ingress_expiry * icp_agent.NANOSECONDS)
            out.update(answer_status=answer.get("status"), certificate_verified=True,
                       status=certificate.lookup_request_status(request_id))
        deadline = time.monotonic() + timeout_s
        while out.get("status") not in (b"replied", b"rejected", b"done", *TERMINAL):
            if time.monotonic() > deadline:
                raise TimeoutError(f"request {request_id.hex()} not done within {timeout_s} s")
            time.sleep(0.2)
            out["status"], certificate = agent.request_status_raw(canister, request_id, verify_certificate=True)
            out["certificate_verified"] = True
        out["reply"] = certificate.lookup_reply(request_id)
        out["rejection"] = certificate.lookup_request_rejection(request_id) if out["status"] in ("rejected", b"rejected") else None
        return out
    called = _step(report, "call", call)

    q_method, q_arg = query_method or method, arg if query_arg is None else query_arg
    _step(report, "query", lambda: {"reply": agent.query_raw(canister, q_method, q_arg), "signatures_verified": False})
    _step(report, "query_signed", lambda: {"reply": agent.query_raw(canister, q_method, q_arg, verify_query_signatures=True),
                                           "signatures_verified": True})

    def request_status():
        if not called:
            raise RuntimeError("no request id: the call step failed")
        status, certificate = agent.request_status_raw(canister, called["request_id"], verify_certificate=True)
        return {"status": status, "certificate_verified": True, "time_ns": certificate.lookup_time(),
                "reply": certificate.lookup_reply(called["request_id"])}
    _step(report, "request_status", request_status)

    def tampered():
        if not called:
            raise RuntimeError("no request id: the call step failed")
        refusals = {}
        honest = agent.read_state_endpoint
        try:
            for kind in TAMPERINGS:
                agent.read_state_endpoint = lambda target, body, kind=kind: tamper(honest(target, body), kind)
                try:
                    agent.request_status_raw(canister, called["request_id"], verify_certificate=True)
                except _NotApplicable:
                    continue
                except _TamperFailed:
                    raise
                except Exception as exc:   # noqa: BLE001 - the library's own refusal, whatever its class
                    refusals[kind] = f"{type(exc).__name__}: {exc}"[:200]
                    continue
                raise RuntimeError(f"icp-py-core accepted a certificate with its {kind} changed")
        finally:
            agent.read_state_endpoint = honest
        return {"refused": refusals}
    _step(report, "tampered", tampered)
    return report


TAMPERINGS = ("signature", "tree leaf", "delegation")


class _NotApplicable(Exception):
    """The answer has nothing of that kind to change (a root subnet's has no delegation)."""


class _TamperFailed(Exception):
    """The answer could not be changed as asked: a fault of this script, not a refusal."""


def _first_leaf_changed(tree: list) -> list:
    """``tree`` (the IC's CBOR hash tree) with its first leaf's last byte flipped."""
    if tree[0] == 3:
        return [3, bytes(tree[1][:-1]) + bytes([tree[1][-1] ^ 1])]
    if tree[0] == 1:
        try:
            return [1, _first_leaf_changed(tree[1]), tree[2]]
        except _NotApplicable:
            return [1, tree[1], _first_leaf_changed(tree[2])]
    if tree[0] == 2:
        return [2, tree[1], _first_leaf_changed(tree[2])]
    raise _NotApplicable("no leaf")


def _flip_last(data: bytes) -> bytes:
    return bytes(data[:-1]) + bytes([data[-1] ^ 1])


def tamper(answer: bytes, kind: str) -> bytes:
    """A read_state answer with one byte of its certificate changed (``TAMPERINGS``)."""
    try:
        return _tampered(answer, kind)
    except _NotApplicable:
        raise
    except Exception as exc:
        raise _TamperFailed(f"{kind}: {type(exc).__name__}: {exc}") from exc


def _tampered(answer: bytes, kind: str) -> bytes:
    outer = dict(cbor2.loads(answer))
    certificate = dict(cbor2.loads(outer["certificate"]))
    if kind == "signature":
        certificate["signature"] = _flip_last(certificate["signature"])
    elif kind == "tree leaf":
        certificate["tree"] = _first_leaf_changed(certificate["tree"])
    elif "delegation" not in certificate:
        raise _NotApplicable("a root subnet's certificate has no delegation")
    else:
        delegation = dict(certificate["delegation"])
        inner = dict(cbor2.loads(delegation["certificate"]))
        inner["signature"] = _flip_last(inner["signature"])
        certificate["delegation"] = {**delegation, "certificate": cbor2.dumps(inner)}
    outer["certificate"] = cbor2.dumps(certificate)
    return cbor2.dumps(outer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.ic_clients.py_live", description=__doc__.split("\n")[0])
    parser.add_argument("url", nargs="?", default=os.environ.get("IC_INGRESS_URL"))
    parser.add_argument("--canister", required=True)
    parser.add_argument("--method", required=True)
    parser.add_argument("--arg", default="")
    parser.add_argument("--query-method")
    parser.add_argument("--query-arg")
    parser.add_argument("--secret", help="hex of a 32-byte Ed25519 key (default: a new one)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a call's answer")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("give the ingress URL or set IC_INGRESS_URL")
    report = run(args.url, args.canister, args.method, bytes.fromhex(args.arg), query_method=args.query_method,
                 query_arg=None if args.query_arg is None else bytes.fromhex(args.query_arg),
                 secret=bytes.fromhex(args.secret) if args.secret else None, timeout_s=args.timeout)
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")
    return 0 if all(v.get("ok") for v in report.values() if isinstance(v, dict)) else 1


if __name__ == "__main__":
    sys.exit(main())
