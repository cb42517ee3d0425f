"""The agent's HTTP transport (shell): one request, its status and bounded body, errors typed.

httpx (synchronous, explicit timeouts) with proxy settings ignored: an agent talks to the
endpoint it is given. ``error_for_answer`` turns a refusal answer into the node's own
``IngressRefused`` subclass (by its ``reason``) or an ``AgentError``.
"""

from __future__ import annotations

import functools
import json
import ssl

import httpx

from .agent_errors import AgentError, RequestRefused, TransportError, UnexpectedAnswer
from .http_wire import MAX_CERTIFICATE_BYTES
from .refusals import IngressRefused, refusal_class

__all__ = ["HttpTransport", "error_for_answer", "json_object"]


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One default TLS context for every transport (making one per client costs ~50 ms)."""
    return ssl.create_default_context()


class HttpTransport:
    def __init__(self, timeout_s: float) -> None:
        self._client = httpx.Client(timeout=timeout_s, trust_env=False, follow_redirects=False, verify=_tls_context())

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, endpoint: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        """Status and body of one request; the body is read up to ``MAX_CERTIFICATE_BYTES``
        (``UnexpectedAnswer`` beyond); ``TransportError`` if there is no HTTP answer."""
        url = f"http://{endpoint}{path}"
        headers = {"content-type": "application/msgpack"} if body is not None else {}
        try:
            with self._client.stream(method, url, content=body, headers=headers) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_CERTIFICATE_BYTES:
                        raise UnexpectedAnswer(f"{url} answered more than {MAX_CERTIFICATE_BYTES} bytes")
                    chunks.append(chunk)
                return response.status_code, b"".join(chunks)
        except httpx.HTTPError as exc:
            raise TransportError(f"{method} {url}: {exc or type(exc).__name__}") from exc


def error_for_answer(status: int, body: bytes) -> IngressRefused | AgentError:
    """The error a non-success answer stands for: the node's ingress refusal by its reason
    (``refusal_class``), else ``RequestRefused``; ``UnexpectedAnswer`` for an answer the API
    does not define."""
    if not 400 <= status < 600:
        return UnexpectedAnswer(f"unexpected HTTP status {status}")
    try:
        answer = json_object(body, status)
    except UnexpectedAnswer as exc:
        return exc
    reason, message = answer.get("reason"), answer.get("message")
    if not isinstance(reason, str) or not isinstance(message, str):
        return UnexpectedAnswer(f"HTTP {status} without a reason")
    refusal = refusal_class(reason)
    return refusal(message) if refusal is not None else RequestRefused(status, reason, message)


def json_object(body: bytes, status: int) -> dict:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise UnexpectedAnswer(f"HTTP {status} with a body that is not JSON") from exc
    if not isinstance(value, dict):
        raise UnexpectedAnswer(f"HTTP {status} with a body that is not a JSON object")
    return value
