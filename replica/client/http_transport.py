"""The agent's HTTP transport (shell): one request, its status, bounded body and refusal
reason, errors typed.

httpx (synchronous, explicit timeouts) with proxy settings ignored: an agent talks to the
endpoint it is given. A node refuses with an HTTP status, a plain-text message and the reason
code in the ``X-Replica-Refusal`` header (``replica.ic.http_interface``); ``error_for_answer``
turns such an answer into the node's own ``IngressRefused`` subclass (by its reason) or an
``AgentError``.
"""

from __future__ import annotations

import functools
import ssl
from typing import NamedTuple

import httpx

from .agent_errors import AgentError, RequestRefused, TransportError, UnexpectedAnswer
from replica.ic.http_interface import REFUSAL_HEADER

from .refusals import IngressRefused, refusal_class

__all__ = ["MAX_ANSWER_BYTES", "Answer", "HttpTransport", "error_for_answer"]

#: Bound on an answer's body: a reply is at most the ingress limit (2 MiB by default) plus
#: the certificate around it.
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class Answer(NamedTuple):
    """One HTTP answer: its status, body and refusal reason (``""`` if it names none)."""

    status: int
    body: bytes
    reason: str = ""


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One default TLS context for every transport (making one per client costs ~50 ms)."""
    return ssl.create_default_context()


class HttpTransport:
    def __init__(self, timeout_s: float) -> None:
        self._client = httpx.Client(timeout=timeout_s, trust_env=False, follow_redirects=False, verify=_tls_context())

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, endpoint: str, path: str, body: bytes | None) -> Answer:
        """The answer to one request; the body is read up to ``MAX_ANSWER_BYTES``
        (``UnexpectedAnswer`` beyond); ``TransportError`` if there is no HTTP answer."""
        url = f"http://{endpoint}{path}"
        headers = {"content-type": "application/cbor"} if body is not None else {}
        try:
            with self._client.stream(method, url, content=body, headers=headers) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_ANSWER_BYTES:
                        raise UnexpectedAnswer(f"{url} answered more than {MAX_ANSWER_BYTES} bytes")
                    chunks.append(chunk)
                return Answer(response.status_code, b"".join(chunks), response.headers.get(REFUSAL_HEADER, ""))
        except httpx.HTTPError as exc:
            raise TransportError(f"{method} {url}: {exc or type(exc).__name__}") from exc


def error_for_answer(answer: Answer) -> IngressRefused | AgentError:
    """The error a non-success answer stands for: the node's ingress refusal by its reason
    (``refusal_class``), else ``RequestRefused``; ``UnexpectedAnswer`` for an answer the API
    does not define."""
    if not 400 <= answer.status < 600:
        return UnexpectedAnswer(f"unexpected HTTP status {answer.status}")
    message = answer.body[:2000].decode("utf-8", "replace")
    if not answer.reason:
        return UnexpectedAnswer(f"HTTP {answer.status} without a refusal reason: {message[:200]}")
    refusal = refusal_class(answer.reason)
    return refusal(message) if refusal is not None else RequestRefused(answer.status, answer.reason, message)
