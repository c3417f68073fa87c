"""A model that misbehaves never loses a capture: the failure becomes a triage incident.

A small HTTP server on 127.0.0.1 stands in for the Messages API and answers
200 with a body that is not JSON (or JSON of the wrong shape, or nothing);
the real anthropic SDK talks to it through ANTHROPIC_BASE_URL, and the
capture handler, run as ``replaybook github handle`` runs it, files the
incident issue on the in-memory port (``FakePort``).
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.github import completed, on_port, run_payload, seed_port_run
from support.servers import Handler

from bot.github.issue_form import parse_incident_issue

ANSWERS = {
    "not JSON": (200, "application/json", b"<html>upstream proxy error</html>"),
    "empty body": (200, "application/json", b""),
    "JSON of the wrong shape": (200, "application/json", b'{"id": 7, "content": "nope"}'),
    "a list": (200, "application/json", b"[1, 2, 3]"),
    "text/plain": (200, "text/plain", b"hello"),
}


class _Broken(Handler):
    answer: tuple[int, str, bytes] = ANSWERS["not JSON"]
    asked: list[str]  # the paths of the requests it answered, per server

    def do_POST(self):
        self.body()
        self.asked.append(self.path)
        status, kind, body = self.answer
        self.reply(status, body, kind)


@pytest.fixture
def broken_model(monkeypatch):
    def start(answer):
        handler = type("Handler", (_Broken,), {"answer": answer, "asked": []})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "x")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
        return handler

    servers: list = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_a_model_answer_that_is_not_usable_files_a_triage_incident(port, root, broken_model, answer):
    model = broken_model(ANSWERS[answer])
    seed_port_run(port, 7)
    outcomes = on_port(port, root, "workflow_run", run_payload(7))
    assert completed(outcomes), outcomes
    assert model.asked, "the capture never asked the model"
    (issue,) = port.issues.values()
    data, problems = parse_incident_issue(issue.body, number=1, created_at="2026-12-01T00:00:00Z")
    assert problems == [] and data["triage"] is True
    assert "Needs triage" in issue.body


BODIES = st.one_of(st.binary(max_size=200), st.sampled_from([
    b'{"type": "message", "content": "x", "usage": {}}', b'{"content": [{"type": "text"}]}',
    b'{"type": "message", "role": "assistant", "content": [{"type": "text", "text": "{not json"}],'
    b' "usage": {"input_tokens": 1, "output_tokens": 1}, "stop_reason": "end_turn", "model": "m", "id": "x"}',
    b'{"type": "message", "role": "assistant", "content": [{"type": "text", "text": "{\\"believed\\": 7}"}],'
    b' "usage": {"input_tokens": 1, "output_tokens": 1}, "stop_reason": "end_turn", "model": "m", "id": "x"}',
]))


@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.sampled_from([200, 400, 404, 413, 422]), st.sampled_from(["application/json", "text/plain"]), BODIES)
def test_any_misbehaving_model_still_files_the_incident(port, root, broken_model, status, kind, body):
    broken_model((status, kind, body))
    run_id = 100 + len(port.issues)
    seed_port_run(port, run_id)
    before = len(port.issues)
    outcomes = on_port(port, root, "workflow_run", run_payload(run_id))
    assert completed(outcomes), outcomes
    assert len(port.issues) == before + 1
