"""Concurrent answers on the local model: the engine holds several sequences of one context, a request takes the
free sequence that shares the longest prefix with it, and answers run at once (REAL model; ``local_model``:
skipped when it is not installed, failed under REPLAYBOOK_REQUIRE_LOCAL_MODEL=1). Nothing here is timed: the
assertions are on which sequence answered and what it reused, as the engine reports them."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from bot.model.local.server import serve
from bot.replay.sandbox.isolation import engine_jail

pytestmark = pytest.mark.local_model

SYSTEM = "You are a coding agent working in a Python repository. " * 8  # a shared prefix worth reusing
LONG = "Count from 1 to 150, one number a line."


def _post(url: str, content: str, *, max_tokens: int, stream: bool = False):
    body = {"model": "local", "max_tokens": max_tokens, "system": SYSTEM, "stream": stream,
            "messages": [{"role": "user", "content": content}], "temperature": 0}
    request = urllib.request.Request(url + "/v1/messages", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "x-api-key": "k"})
    return urllib.request.urlopen(request, timeout=900)


@pytest.fixture(scope="module")
def two_sequences(local_model):
    with serve(local_model, jail=engine_jail, api_key="k", context_size=2048, sequences=2) as running:
        yield running


def test_a_second_request_is_answered_on_another_sequence_while_the_first_runs(two_sequences):
    url = two_sequences.base_url
    first = _post(url, LONG, max_tokens=120, stream=True)
    first.readline()  # the stream has begun: the first request holds its sequence
    answers = {}

    def second() -> None:
        answers["second"] = json.load(_post(url, "Say OK.", max_tokens=8))

    worker = threading.Thread(target=second)
    worker.start()
    worker.join(900)
    rest = first.read().decode()
    assert "message_stop" in rest and answers["second"]["content"], answers
    calls = two_sequences.stats().calls
    by_sequence = {c.sequence for c in calls[-2:]}
    assert by_sequence == {0, 1}, calls[-2:]
    # the first request's sequence still holds its prompt: the same prompt again reuses it whole, less one token
    long_call = next(c for c in calls[-2:] if c.output_tokens > 8)
    again = json.load(_post(url, LONG, max_tokens=4))
    last = two_sequences.stats().calls[-1]
    assert last.sequence == long_call.sequence and last.reused_tokens >= long_call.prompt_tokens - 1, last
    assert again["usage"]["cache_read_input_tokens"] == last.reused_tokens
