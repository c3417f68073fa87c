"""The gateway's OpenAI Responses API (what Codex CLI speaks): scripted and upstream, counted like Messages."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

from support.servers import Handler, recorded

from bot.model import pricing
from bot.replay.gateway.policy import parse_policy
from bot.replay.gateway.server import Gateway, Upstream

RULE = "Always use the package-local test config."
POLICY = parse_policy({
    "branch_on": "package-local test config",
    "with_rule": [{"bash": "cd packages/api && pytest -q"}, {"say": "Fixed it. [rule-0001]"}],
    "without_rule": [{"bash": "pytest -q"}, {"say": "Done."}],
})
EXEC = {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {
    "cmd": {"type": "string"}}, "required": ["cmd"]}}
REAL_KEY = "sk-proj-REAL-OPENAI-KEY-never-shown"


def request(instructions: str = "", *, history=(), stream=False) -> dict:
    return {"model": "gpt-5-codex", "stream": stream, "tools": [EXEC], "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": instructions}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the tests"}]},
        *history]}


def post(gw: Gateway, body: dict, token: str | None = None) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection(urlsplit(gw.url).netloc, timeout=5)
    conn.request("POST", "/v1/responses", body=json.dumps(body), headers={
        "content-type": "application/json", "authorization": f"Bearer {token or gw.token}"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.getheader("content-type") or "", data


def events(data: bytes) -> list[dict]:
    return [json.loads(line[5:]) for line in data.splitlines() if line.startswith(b"data:")]


def test_scripted_responses_branch_on_developer_text_and_call_codex_shell_tool() -> None:
    with Gateway(POLICY) as gw:
        status, _, data = post(gw, request(RULE))
        assert status == 200
        body = json.loads(data)
        (call,) = [o for o in body["output"] if o["type"] == "function_call"]
        assert call["name"] == "exec_command" and json.loads(call["arguments"])["cmd"] == "cd packages/api && pytest -q"
        # The tool's result comes back as function_call_output: the script moves on to its next step.
        history = [call, {"type": "function_call_output", "call_id": call["call_id"], "output": "1 passed"}]
        _, _, data = post(gw, request(RULE, history=history))
        texts = [c["text"] for o in json.loads(data)["output"] if o["type"] == "message" for c in o["content"]]
        assert texts == ["[SIMULATED] Fixed it. [rule-0001]"]
        _, _, data = post(gw, request("no rule here"))
        assert "pytest -q" == json.loads(json.loads(data)["output"][1]["arguments"])["cmd"]
    assert [c.branch for c in gw.calls] == ["with_rule", "with_rule", "without_rule"]
    assert all(c.simulated and c.input_tokens > 0 and c.output_tokens > 0 and c.cost_usd > 0 for c in gw.calls)


def test_agents_md_sent_as_a_user_message_counts_as_instructions() -> None:
    body = request("")
    body["input"].insert(1, {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": f"# AGENTS.md instructions for /work\n\n<INSTRUCTIONS>\n{RULE}\n</INSTRUCTIONS>"}]})
    with Gateway(POLICY) as gw:
        post(gw, body)
    assert gw.calls[0].branch == "with_rule"


def test_scripted_stream_is_responses_sse_ending_in_completed_with_usage() -> None:
    with Gateway(POLICY) as gw:
        status, ctype, data = post(gw, request(RULE, stream=True))
    assert status == 200 and ctype == "text/event-stream"
    got = events(data)
    kinds = [e["type"] for e in got]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.done") == 2
    assert [e["sequence_number"] for e in got] == list(range(len(got)))
    usage = got[-1]["response"]["usage"]
    (call,) = gw.calls
    assert (usage["input_tokens"], usage["output_tokens"]) == (call.input_tokens, call.output_tokens) and call.stream


def test_responses_need_the_gateway_token() -> None:
    with Gateway(POLICY) as gw:
        status, _, _ = post(gw, request(RULE), token="sk-guess")
    assert status == 401 and gw.calls == []


class FakeOpenAI(Handler):
    """A fake Responses API that checks the Bearer key and (badly) echoes it back, as a leak test."""

    protocol_version = "HTTP/1.1"
    received: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.body())
        self.received.append({"path": self.path, "headers": dict(self.headers.items())})
        if self.headers.get("authorization") != f"Bearer {REAL_KEY}":
            return self.reply_json(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
        response = {"id": "resp_up", "object": "response", "status": "completed", "model": body["model"],
                    "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                                "content": [{"type": "output_text", "text": f"key {REAL_KEY}", "annotations": []}]}],
                    "usage": {"input_tokens": 3000, "input_tokens_details": {"cached_tokens": 2000},
                              "output_tokens": 100, "output_tokens_details": {"reasoning_tokens": 40}}}
        stream = [{"type": "response.created", "response": {**response, "usage": None, "output": []}},
                  {"type": "response.output_text.delta", "delta": "hi"},
                  {"type": "response.completed", "response": response}]
        self.reply_events(stream)


openai_upstream = recorded(FakeOpenAI)


def test_upstream_responses_forward_with_a_bearer_key_and_count_cached_tokens(openai_upstream) -> None:
    url, received = openai_upstream
    with Gateway(upstream=Upstream(REAL_KEY, base_url=url)) as gw:
        status, _, data = post(gw, request(RULE, stream=True))
    assert status == 200 and REAL_KEY.encode() not in data and b"[redacted]" in data
    (seen,) = received
    assert seen["path"] == "/v1/responses" and "x-api-key" not in seen["headers"]
    assert gw.token not in json.dumps(seen["headers"])
    (call,) = gw.calls
    # OpenAI's input_tokens include the cached ones: 1,000 fresh + 2,000 cache reads, priced as for Messages.
    assert (call.input_tokens, call.cache_read_input_tokens, call.output_tokens) == (1000, 2000, 100)
    assert call.cost_usd == pricing.cost_usd("gpt-5-codex", 1000, 100, cache_read_input_tokens=2000) > 0
    assert not call.simulated and call.stop_reason == "completed"
