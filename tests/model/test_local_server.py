"""The local model server against real clients: the anthropic SDK and the openai SDK, with the REAL model
answering (``local_model``: skipped when it is not installed, failed under REPLAYBOOK_REQUIRE_LOCAL_MODEL=1).

Requests use temperature 0 (the anthropic SDK 2.x takes it only as ``extra_body``) and small ``max_tokens``: the model is never scripted, but a greedy answer to a plain
instruction is stable enough to assert its shape (a tool call to the offered tool)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.local_model

SYSTEM = "You are a coding agent. You act only by calling the bash tool; never answer in prose."
BASH = {"name": "bash", "description": "Run a shell command in the repository and return its output.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
ASK = "List the files in the current directory."


def _anthropic(server, **kw):
    anthropic = pytest.importorskip("anthropic")
    return anthropic.Anthropic(base_url=server.base_url, api_key="test-key", max_retries=0, **kw)


def test_a_tool_call_and_its_result_round_trip_through_the_anthropic_sdk(local_server):
    client = _anthropic(local_server)
    messages = [{"role": "user", "content": ASK}]
    first = client.messages.create(model="local", system=SYSTEM, tools=[BASH], messages=messages, max_tokens=60,
                                   extra_body={"temperature": 0})
    assert first.stop_reason == "tool_use", first.content
    call = next(b for b in first.content if b.type == "tool_use")
    assert call.name == "bash" and isinstance(call.input.get("command"), str) and call.id.startswith("toolu_")
    assert first.usage.input_tokens > 100 and first.usage.output_tokens > 0
    messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                               "content": "README.md\nsetup.py\nsrc"}]}]
    calls_before = len(local_server.stats().calls)
    second = client.messages.create(model="local", system=SYSTEM, tools=[BASH], messages=messages, max_tokens=24,
                                    extra_body={"temperature": 0})
    assert second.stop_reason in ("end_turn", "tool_use", "max_tokens") and second.content
    # The second turn reuses the first's evaluated prefix: only its new tokens are evaluated.
    assert second.usage.cache_read_input_tokens >= first.usage.input_tokens - 5
    last = local_server.stats().calls[calls_before]
    assert last.reused_tokens == second.usage.cache_read_input_tokens
    assert last.evaluated_tokens == last.prompt_tokens - last.reused_tokens < 80


def test_streaming_through_the_anthropic_sdk_carries_text_and_usage(local_server):
    client = _anthropic(local_server)
    with client.messages.stream(model="local", max_tokens=12, extra_body={"temperature": 0},
                                messages=[{"role": "user", "content": "Say hello in five words."}]) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert pieces and "".join(pieces) == final.content[0].text
    assert final.stop_reason in ("end_turn", "max_tokens") and 0 < final.usage.output_tokens <= 12
    assert final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0) > 5


def test_a_streamed_tool_call_arrives_as_a_tool_use_block(local_server):
    client = _anthropic(local_server)
    with client.messages.stream(model="local", system=SYSTEM, tools=[BASH], max_tokens=60, extra_body={"temperature": 0},
                                messages=[{"role": "user", "content": ASK}]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [b.type for b in final.content][-1] == "tool_use" and isinstance(final.content[-1].input["command"], str)


def test_errors_come_in_anthropics_shape(local_server):
    anthropic = pytest.importorskip("anthropic")
    client = _anthropic(local_server)
    with pytest.raises(anthropic.BadRequestError, match="max_tokens: required"):
        client.messages.create(model="local", max_tokens=0, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError, match="the context holds 4096"):
        client.messages.create(model="local", max_tokens=8, messages=[{"role": "user", "content": "word " * 5000}])
    with pytest.raises(anthropic.AuthenticationError, match="API key does not match"):
        anthropic.Anthropic(base_url=local_server.base_url, api_key="wrong", max_retries=0).messages.create(
            model="local", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    request = urllib.request.Request(local_server.base_url + "/v1/messages", data=b"{not json",
                                     headers={"x-api-key": "test-key", "Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    assert caught.value.code == 400
    assert json.loads(caught.value.read()) == {"type": "error", "error": {"type": "invalid_request_error",
                                                                         "message": "the body is not JSON"}}


def test_the_openai_client_gets_tool_calls_streaming_chunks_and_usage(local_server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=local_server.base_url + "/v1", api_key="test-key", max_retries=0)
    tools = [{"type": "function", "function": {"name": "bash", "description": BASH["description"],
                                               "parameters": BASH["input_schema"]}}]
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ASK}]
    done = client.chat.completions.create(model="local", messages=messages, tools=tools, max_tokens=60, temperature=0)
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    call = choice.message.tool_calls[0]
    assert call.function.name == "bash" and isinstance(json.loads(call.function.arguments)["command"], str)
    assert done.usage.prompt_tokens > 100 and done.usage.completion_tokens > 0
    messages += [{"role": "assistant", "content": choice.message.content,
                  "tool_calls": [call.model_dump()]},
                 {"role": "tool", "tool_call_id": call.id, "content": "README.md\nsrc"}]
    chunks = list(client.chat.completions.create(model="local", messages=messages, tools=tools, max_tokens=16,
                                                 temperature=0, stream=True, stream_options={"include_usage": True}))
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishes) == 1 and finishes[0] in ("stop", "length", "tool_calls")
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens_details.cached_tokens > 100


def test_a_request_past_its_deadline_gets_an_error_not_a_hang(local_model):
    anthropic = pytest.importorskip("anthropic")
    from bot.model.local.server import serve
    from bot.replay.sandbox.isolation import engine_jail

    # No machine writes 1,500 tokens in 2 s on this engine (about 10 a second at best on 2 cores).
    with serve(local_model, jail=engine_jail, seed=1, timeout_s=2.0, context_size=2048) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.APIStatusError, match="did not finish its answer in time") as caught:
            client.messages.create(model="local", max_tokens=1500, messages=[{"role": "user", "content": "Count to 2000."}])
        assert caught.value.status_code == 504


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_hangs_up_stops_the_answer_and_the_next_request_is_not_kept_waiting(local_server, stream):
    """A replay that times out hangs up on the model; the engine must stop writing for nobody, or every later
    request waits behind it (bench/real_model.py saw trials time out in a row that way)."""
    anthropic = pytest.importorskip("anthropic")
    calls = len(local_server.stats().calls)
    impatient = _anthropic(local_server, timeout=1.0)
    # A prompt of about 2,300 new tokens (never evaluated before: its words are this case's own), so its evaluation
    # alone outlasts the client's 1 s on any CPU; how long the model would go on answering does not matter.
    words = " ".join(f"w{i}{'s' if stream else 'n'}{i * 7919 % 1000}" for i in range(300))
    ask = [{"role": "user", "content": f"Repeat these words back exactly, one per line:\n{words}"}]
    with pytest.raises(anthropic.APITimeoutError):
        if stream:
            with impatient.messages.stream(model="local", max_tokens=1000, messages=ask) as events:
                for _ in events.text_stream:
                    pass
        else:
            impatient.messages.create(model="local", max_tokens=1000, messages=ask)
    after = _anthropic(local_server).messages.create(model="local", max_tokens=8, extra_body={"temperature": 0},
                                                     messages=[{"role": "user", "content": "Say hi."}])
    assert after.content and after.stop_reason in ("end_turn", "max_tokens")
    hung_up = local_server.stats().calls[calls]
    assert hung_up.stop_reason == "cancelled" and hung_up.output_tokens < 1000
