"""A prefix evaluated on one of the engine's sequences reaches another through a state snapshot (REAL model;
``local_model``: skipped when it is not installed, failed under REPLAYBOOK_REQUIRE_LOCAL_MODEL=1). Each test starts
its own server, so no snapshot of another test's is there. Nothing here is timed: the assertions are on what the
engine reports it reused (and whence) and on the answers, which at temperature 0 must not depend on whether the
prefix was evaluated here or loaded from a snapshot."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from bot.model.local.server import serve
from bot.replay.sandbox.isolation import engine_jail

pytestmark = pytest.mark.local_model

# A long shared prefix (well over the engine's 256-token threshold), as an agent's system prompt and tools are.
SYSTEM = ("You are a coding agent working in a Python repository. You run commands with the bash tool, read files "
          "before you change them, keep each change small, and run the test suite after every change. ") * 8
ASK = "Name one command you would run first. Answer in one short line."
OTHER = "You are a poet."  # a prompt sharing almost nothing with SYSTEM's


def _post(url: str, system: str, content: str, max_tokens: int = 8) -> dict:
    body = {"model": "local", "max_tokens": max_tokens, "system": system, "temperature": 0,
            "messages": [{"role": "user", "content": content}]}
    request = urllib.request.Request(url + "/v1/messages", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "x-api-key": "k"})
    with urllib.request.urlopen(request, timeout=900) as answer:
        return json.load(answer)


@pytest.fixture
def two_sequences(local_model):
    with serve(local_model, jail=engine_jail, api_key="k", context_size=2048, sequences=2) as running:
        yield running


def test_a_sequence_that_lost_the_prefix_loads_it_from_a_snapshot_and_answers_the_same(two_sequences):
    url = two_sequences.base_url
    first = _post(url, SYSTEM, ASK)  # evaluated here: its prompt's state is kept as a snapshot
    made = two_sequences.stats().calls[-1]
    assert made.snapshot_tokens == 0 and made.evaluated_tokens == made.prompt_tokens > 300, made
    _post(url, OTHER, "Say OK.", max_tokens=2)  # takes that sequence (it shares the template's first tokens)
    displaced = two_sequences.stats().calls[-1]
    assert displaced.sequence == made.sequence and displaced.reused_tokens < 10, displaced
    again = _post(url, SYSTEM, ASK)
    loaded = two_sequences.stats().calls[-1]
    # without the snapshot the free sequences held a few tokens of it at most; with it, all of it but the last token
    assert loaded.snapshot_tokens == loaded.reused_tokens == loaded.prompt_tokens - 1, loaded
    assert loaded.evaluated_tokens == 1 and again["usage"]["cache_read_input_tokens"] == loaded.reused_tokens
    assert again["content"] == first["content"], (first["content"], again["content"])


def test_requests_arriving_together_evaluate_their_shared_prefix_once(two_sequences):
    url = two_sequences.base_url
    answers: dict[int, dict] = {}

    def ask(i: int) -> None:
        answers[i] = _post(url, SYSTEM, ASK)

    workers = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(900)
    calls = two_sequences.stats().calls
    assert len(calls) == 2 and {c.sequence for c in calls} == {0, 1}, calls  # each on a sequence of its own
    evaluated = min(calls, key=lambda c: c.snapshot_tokens)
    loaded = max(calls, key=lambda c: c.snapshot_tokens)
    # one evaluated the prompt; the other, on the empty sequence, waited for its snapshot rather than evaluating
    # the same prefix beside it
    assert evaluated.snapshot_tokens == 0 and evaluated.evaluated_tokens == evaluated.prompt_tokens, calls
    assert loaded.snapshot_tokens == loaded.prompt_tokens - 1 and loaded.evaluated_tokens == 1, calls
    assert answers[0]["content"] == answers[1]["content"], answers
