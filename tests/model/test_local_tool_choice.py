"""Forced tool calls on the local model: ``tool_choice`` (Messages API ``any``/``tool``, Chat Completions
``required``/a named function) is held by a grammar, so even a request that invites prose gets one call to an
offered tool, its arguments of that tool's schema. The reading of ``tool_choice`` is checked without the model;
the answers come from the REAL model (``local_model``: skipped when it is not installed, failed under
REPLAYBOOK_REQUIRE_LOCAL_MODEL=1), never scripted: the assertions are on the answer's shape, which the grammar
guarantees, at the model's default sampling."""

from __future__ import annotations

import json

import pytest

from bot.model.local import messages_api, openai_api
from bot.model.local.messages_api import RequestError

BASH = {"name": "bash", "description": "Run a shell command in the repository and return its output.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
FINISH = {"name": "finish", "description": "Say the task is done, with a one-line summary.",
          "input_schema": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}}
PROSE = "Write a haiku about autumn leaves. Do not use any tool."


def _body(**kw):
    return {"model": "local", "max_tokens": 200, "messages": [{"role": "user", "content": PROSE}],
            "tools": [BASH, FINISH], **kw}


def test_tool_choice_any_becomes_a_grammar_of_one_call_to_an_offered_tool():
    request = messages_api.read(_body(tool_choice={"type": "any"}))
    assert request.forced_call
    names = sorted(o["properties"]["name"]["const"] for o in request.json_schema["oneOf"])
    assert names == ["bash", "finish"]
    one = messages_api.read(_body(tool_choice={"type": "tool", "name": "finish"}))
    assert one.json_schema["properties"]["name"] == {"const": "finish"}
    assert one.json_schema["properties"]["arguments"]["required"] == ["summary"]
    free = messages_api.read(_body(tool_choice={"type": "auto"}))
    assert not free.forced_call and free.json_schema is None


@pytest.mark.parametrize("choice, field", [
    ({"type": "tool", "name": "rm"}, "tool_choice.name"),
    ({"type": "sometimes"}, "tool_choice"),
    ("any", "tool_choice"),
])
def test_a_tool_choice_that_cannot_be_held_is_refused_naming_the_field(choice, field):
    with pytest.raises(RequestError, match=field):
        messages_api.read(_body(tool_choice=choice))


def test_a_forced_call_without_tools_or_with_a_shapeless_schema_is_refused():
    with pytest.raises(RequestError, match="offers no tools"):
        messages_api.read({**_body(tool_choice={"type": "any"}), "tools": []})
    shapeless = {"name": "any", "input_schema": {"type": "object", "properties": {"x": {}}, "required": ["x"]}}
    with pytest.raises(RequestError, match=r"tools.0 \(any\)"):
        messages_api.read({**_body(tool_choice={"type": "any"}), "tools": [shapeless]})


def test_chat_completions_required_and_a_named_function():
    tools = [{"type": "function", "function": {"name": t["name"], "parameters": t["input_schema"]}} for t in (BASH, FINISH)]
    body = {"model": "local", "messages": [{"role": "user", "content": PROSE}], "tools": tools}
    assert openai_api.read({**body, "tool_choice": "required"}).forced_call
    named = openai_api.read({**body, "tool_choice": {"type": "function", "function": {"name": "bash"}}})
    assert named.json_schema["properties"]["name"] == {"const": "bash"}
    assert not openai_api.read({**body, "tool_choice": "auto"}).forced_call
    with pytest.raises(RequestError, match="tool_choice.function.name"):
        openai_api.read({**body, "tool_choice": {"type": "function", "function": {"name": "rm"}}})


@pytest.mark.local_model
@pytest.mark.parametrize("stream", [False, True])
def test_the_real_model_asked_for_prose_answers_with_a_call_when_one_is_required(local_server, stream):
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=local_server.base_url, api_key="test-key", max_retries=0)
    kw = dict(model="local", max_tokens=200, tools=[BASH, FINISH], tool_choice={"type": "any"},
              messages=[{"role": "user", "content": PROSE}])
    if stream:
        with client.messages.stream(**kw) as events:
            reply = events.get_final_message()
    else:
        reply = client.messages.create(**kw)
    calls = [b for b in reply.content if b.type == "tool_use"]
    assert reply.stop_reason == "tool_use" and len(calls) == 1, reply.content
    assert not [b for b in reply.content if b.type == "text"]
    schema = {"bash": "command", "finish": "summary"}[calls[0].name]
    assert set(calls[0].input) == {schema} and isinstance(calls[0].input[schema], str)


@pytest.mark.local_model
def test_the_real_model_calls_the_named_function_through_the_openai_client(local_server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=local_server.base_url + "/v1", api_key="test-key", max_retries=0)
    tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                               "parameters": t["input_schema"]}} for t in (BASH, FINISH)]
    reply = client.chat.completions.create(model="local", max_tokens=200, tools=tools,
                                           tool_choice={"type": "function", "function": {"name": "finish"}},
                                           messages=[{"role": "user", "content": PROSE}])
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message
    (call,) = choice.message.tool_calls
    assert call.function.name == "finish" and set(json.loads(call.function.arguments)) == {"summary"}
