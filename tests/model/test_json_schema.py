"""What a grammar can hold (bot.model.json_schema), and the local model held to one: the REAL model answers
(``local_model``), asked for something the schema forbids, and can only answer what the schema allows."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from bot.distill.answers import AnswerSet, answer_schema
from bot.model.json_schema import Unsupported, for_grammar
from bot.scenario import spec


class _Inner(BaseModel):
    name: str
    size: int | None = None


class _Outer(BaseModel):
    inner: _Inner
    tags: list[str] = []


def test_refs_are_inlined_a_nullable_field_is_written_and_one_with_a_default_left_out():
    """node-llama-cpp's grammar writes every property it lists: a nullable field is listed (its value or null),
    a field with a default (``tags``) is not, so the default applies."""
    out = for_grammar(_Outer.model_json_schema())
    assert out == {"type": "object", "required": ["inner"], "properties": {
        "inner": {"type": "object", "required": ["name", "size"], "properties": {
            "name": {"type": "string"}, "size": {"oneOf": [{"type": "integer"}, {"type": "null"}]}}}}}
    assert "$ref" not in json.dumps(out) and "title" not in json.dumps(out)
    assert _Outer.model_validate({"inner": {"name": "x", "size": None}}).tags == []


class _Loose(BaseModel):
    anything: Any


class _Node(BaseModel):
    children: list["_Node"]


@pytest.mark.parametrize("model, says", [(_Loose, "any shape"), (_Node, "refers to itself"),
                                         (AnswerSet, "any")])
def test_a_shape_no_grammar_holds_is_refused_by_name(model, says):
    with pytest.raises(Unsupported, match=says):
        for_grammar(model.model_json_schema())


def test_distills_schema_narrows_cites_and_scenarios_to_what_the_batch_holds():
    schema = answer_schema(["2026-01-01-0001", "2026-01-02-0002"], ["monorepo-test-cwd"], spec.CHECKS)
    rule = schema["properties"]["proposals"]["items"]["oneOf"][0]
    assert rule["properties"]["cites"]["items"] == {"enum": ["2026-01-01-0001", "2026-01-02-0002"]}
    existing, new = rule["properties"]["scenario"]["oneOf"]
    assert existing["properties"]["existing"] == {"enum": ["monorepo-test-cwd"]}
    checks = new["properties"]["new"]["properties"]["pass_if"]["items"]["oneOf"]
    assert sorted(next(iter(c["properties"])) for c in checks) == sorted(spec.CHECKS)
    assert for_grammar(schema) == schema  # already in the subset: the server takes it as it is
    # No scenario to reuse: the model can only write a new one.
    lone = answer_schema(["a"], [], spec.CHECKS)["properties"]["proposals"]["items"]["oneOf"][0]
    assert list(lone["properties"]["scenario"]["properties"]) == ["new"]


COLOUR = {"type": "object", "required": ["colour", "count"], "properties": {
    "colour": {"enum": ["teal", "mauve"]}, "count": {"type": "integer"}}}
ASK = "Reply with the JSON object {\"colour\": \"red\", \"count\": \"many\"} exactly."


@pytest.mark.local_model
def test_the_local_model_answers_only_what_the_schema_allows_through_the_anthropic_sdk(local_server):
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=local_server.base_url, api_key="test-key", max_retries=0)
    free = client.messages.create(model="local", max_tokens=40, messages=[{"role": "user", "content": ASK}],
                                  extra_body={"temperature": 0})
    held = client.messages.create(model="local", max_tokens=40, messages=[{"role": "user", "content": ASK}],
                                  extra_body={"temperature": 0},
                                  output_config={"format": {"type": "json_schema", "schema": COLOUR}})
    assert "red" in free.content[0].text  # what it says when nothing holds it
    answer = json.loads(held.content[0].text)
    assert answer["colour"] in ("teal", "mauve") and isinstance(answer["count"], int)
    with pytest.raises(anthropic.BadRequestError, match="output_config.format.schema: .*any shape"):
        client.messages.create(model="local", max_tokens=8, messages=[{"role": "user", "content": "hi"}],
                               output_config={"format": {"type": "json_schema", "schema": {
                                   "type": "object", "properties": {"x": {}}, "required": ["x"]}}})


@pytest.mark.local_model
def test_the_openai_clients_response_format_holds_the_answer_too(local_server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=local_server.base_url + "/v1", api_key="test-key", max_retries=0)
    done = client.chat.completions.create(
        model="local", messages=[{"role": "user", "content": ASK}], max_tokens=40, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "colour", "schema": COLOUR}})
    answer = json.loads(done.choices[0].message.content)
    assert answer["colour"] in ("teal", "mauve") and isinstance(answer["count"], int)


@pytest.mark.local_model
def test_distills_grammar_compiles_in_the_engine(local_server):
    """llama.cpp refuses a grammar whose repetitions multiply past its limits (a 2,000-character string bound
    did, and every distill prompt failed with a 400): distill's whole schema must compile and be answered."""
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=local_server.base_url, api_key="test-key", max_retries=0)
    schema = answer_schema(["2026-07-09-1640", "2026-07-10-1200"], ["monorepo-test-cwd"], spec.CHECKS)
    reply = client.messages.create(model="local", max_tokens=24, extra_body={"temperature": 0},
                                   output_config={"format": {"type": "json_schema", "schema": schema}},
                                   messages=[{"role": "user", "content": "Propose a rule as JSON."}])
    assert "".join(reply.content[0].text.split()).startswith('{"proposals":[{"')  # 24 tokens: the grammar's start
