"""The guard both gRPC services run each call through: who is calling, and the status code
of every failure (a refusal's own, INTERNAL for a bug, whose details never reach the peer)."""

from __future__ import annotations

import logging
import pickle

import grpc
import pytest

from xnet.grpc.guard import Refusal, guarded, listed_client, refusing
from xnet.grpc.tls import pem_fingerprint


class Aborted(Exception):
    pass


class FakeContext:
    """A servicer context holding the client's certificate; ``abort`` raises like gRPC's."""

    def __init__(self, pem: bytes | None) -> None:
        self._auth = {"x509_pem_cert": [pem]} if pem is not None else {}
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def auth_context(self):
        return self._auth

    def abort(self, code, details):
        self.aborted = (code, details)
        raise Aborted()


@pytest.fixture
def listed(identities):
    return {pem_fingerprint(identities["client"].certificate_pem()): "node-client"}


def refusal_of(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(Refusal) as refused:
        call()
    return refused.value.code, refused.value.details


def test_a_listed_certificate_names_its_caller(identities, listed):
    assert listed_client(FakeContext(identities["client"].certificate_pem()), listed) == "node-client"


def test_certificates_missing_unreadable_or_unlisted_are_refused(identities, listed):
    assert refusal_of(lambda: listed_client(FakeContext(None), listed)) == (
        grpc.StatusCode.UNAUTHENTICATED, "no client certificate")
    assert refusal_of(lambda: listed_client(FakeContext(b"not a certificate"), listed)) == (
        grpc.StatusCode.PERMISSION_DENIED, "unreadable client certificate")
    assert refusal_of(lambda: listed_client(FakeContext(identities["stranger"].certificate_pem()), listed)) == (
        grpc.StatusCode.PERMISSION_DENIED, "client certificate is not listed")


def test_refusing_maps_the_first_matching_type_and_lets_others_through():
    class Narrow(ValueError):
        pass

    table = {Narrow: grpc.StatusCode.NOT_FOUND, ValueError: grpc.StatusCode.INVALID_ARGUMENT}

    def raising(exc):
        with refusing(table):
            raise exc

    assert refusal_of(lambda: raising(Narrow("gone"))) == (grpc.StatusCode.NOT_FOUND, "gone")
    assert refusal_of(lambda: raising(ValueError("bad"))) == (grpc.StatusCode.INVALID_ARGUMENT, "bad")
    with pytest.raises(KeyError):
        raising(KeyError("a bug"))


def test_guarded_answers_and_passes_the_caller(identities, listed):
    run = guarded(lambda body, caller: body + caller.encode(), lambda c: listed_client(c, listed), "test call")
    assert run(b"hello from ", FakeContext(identities["client"].certificate_pem())) == b"hello from node-client"


def test_guarded_refuses_before_the_handler_runs(identities, listed):
    ran = []
    run = guarded(lambda body, caller: ran.append(body) or b"", lambda c: listed_client(c, listed), "test call")
    context = FakeContext(identities["stranger"].certificate_pem())
    with pytest.raises(Aborted):
        run(b"x", context)
    assert context.aborted == (grpc.StatusCode.PERMISSION_DENIED, "client certificate is not listed") and not ran


def test_a_refusal_is_sent_with_its_code_and_details():
    def handler(body, caller):
        raise Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy")

    context = FakeContext(None)
    with pytest.raises(Aborted):
        guarded(handler, lambda c: "caller", "test call")(b"", context)
    assert context.aborted == (grpc.StatusCode.RESOURCE_EXHAUSTED, "busy")


def test_a_bug_is_logged_and_answered_internal_without_its_details(caplog):
    def handler(body, caller):
        raise RuntimeError("secret path /etc/node.key")

    context = FakeContext(None)
    with caplog.at_level(logging.ERROR, logger="xnet.grpc.guard"), pytest.raises(Aborted):
        guarded(handler, lambda c: "caller", "test call")(b"", context)
    assert context.aborted == (grpc.StatusCode.INTERNAL, "internal error")
    record, = caplog.records
    assert record.getMessage() == "test call failed" and "secret path" in caplog.text   # logged, with traceback


def test_a_refusal_pickles():
    copy = pickle.loads(pickle.dumps(Refusal(grpc.StatusCode.NOT_FOUND, "none")))
    assert (copy.code, copy.details) == (grpc.StatusCode.NOT_FOUND, "none")


def test_both_services_use_the_guard_and_define_none_of_their_own():
    import inspect

    from replica.node import agreement_transport
    from xnet.grpc import server

    for module in (server, agreement_transport):
        source = inspect.getsource(module)
        assert "guarded(" in source and "listed_client(" in source
        assert "context.abort" not in source and "x509_pem_cert" not in source
