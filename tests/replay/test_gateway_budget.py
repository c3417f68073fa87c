"""The gateway's budget holds against parallel requests: each one reserves its worst case first.

The upstream is a local fake of both APIs that answers slowly and spends all it
may: as many output tokens as the forwarded request allows (a model that never
stops early), and input tokens in proportion to the body. The agents are the
real anthropic and openai SDKs, many threads at once.
"""

from __future__ import annotations

import json
import shlex
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer

import anthropic
import openai
import pytest
from support.servers import Handler, serving

from bot.model import pricing
from bot.replay.engine import run_trial
from bot.replay.gateway.budget import OUTPUT_CAP_TOKENS
from bot.replay.gateway.server import Gateway, Upstream

REAL_KEY = "sk-REAL-KEY-never-shown-to-agents"
MODEL, CODEX_MODEL = "claude-sonnet-4-6", "gpt-5-codex"
PROMPT = "Fix the flaky test in packages/api. " * 100  # about 3.6 KB: ~900 tokens
UNBOUNDED_OUTPUT = 100_000  # what the fake spends when a request sets no limit: all a real model may


class SpendingUpstream(Handler):
    """Messages and Responses, answered after ``delay_s`` with the most usage the request allows."""

    protocol_version = "HTTP/1.1"
    delay_s = 0.4
    stall_s = 0.0  # pause after message_start, as a model does while it writes
    seen: list[dict] = []

    def do_POST(self) -> None:
        raw = self.body()
        body = json.loads(raw)
        self.seen.append(body)
        time.sleep(self.delay_s)
        input_tokens = len(raw) // 4
        if self.path.endswith("/responses") and body.get("background"):
            # Answered at once, usage unknown; the model runs on (and is billed) after the connection ends.
            return self._json({"id": "resp_bg", "object": "response", "status": "queued", "model": body["model"],
                               "output": [], "usage": None})
        if self.path.endswith("/responses"):
            out = body.get("max_output_tokens") or UNBOUNDED_OUTPUT
            answer = {"id": "resp_up", "object": "response", "status": "completed", "model": body["model"],
                      "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                                  "content": [{"type": "output_text", "text": "done", "annotations": []}]}],
                      "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                                "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
                                "total_tokens": input_tokens + out}}
            return self._json(answer)
        out = body.get("max_tokens") or UNBOUNDED_OUTPUT
        message = {"id": "msg_up", "type": "message", "role": "assistant", "model": body["model"],
                   "content": [{"type": "text", "text": "done"}], "stop_reason": "max_tokens", "stop_sequence": None,
                   "usage": {"input_tokens": input_tokens, "output_tokens": out}}
        if not body.get("stream"):
            return self._json(message)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        start = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": input_tokens,
                                                                           "output_tokens": 1}}
        for event in [{"type": "message_start", "message": start},
                      {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                      {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "done"}},
                      {"type": "content_block_stop", "index": 0},
                      {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                       "usage": {"output_tokens": out}},
                      {"type": "message_stop"}]:
            data = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            except OSError:  # the gateway hung up; a real API bills what it wrote so far
                return
            time.sleep(self.stall_s if event["type"] == "message_start" else 0)
        self.wfile.write(b"0\r\n\r\n")

    def _json(self, payload: dict) -> None:
        self.reply_json(200, payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many agents' connections at once


@pytest.fixture
def upstream():
    SpendingUpstream.seen = []
    with serving(SpendingUpstream, _Server) as url:
        yield Upstream(REAL_KEY, base_url=url)


def in_parallel(n: int, call) -> list:
    """``call(i)`` on n threads at once; each result or the exception it raised."""
    def one(i: int):
        try:
            return call(i)
        except Exception as exc:  # the refusals are what this test is about
            return exc

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def test_parallel_messages_never_spend_past_the_budget(upstream) -> None:
    with Gateway(upstream=upstream, max_cost_usd=0.50) as gw:
        sdk = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)

        def call(i: int):
            args = dict(model=MODEL, max_tokens=8000, messages=[{"role": "user", "content": PROMPT}])
            if i % 2:
                with sdk.messages.stream(**args) as stream:
                    return stream.get_final_message()
            return sdk.messages.create(**args)

        results = in_parallel(24, call)
    answered = [r for r in results if isinstance(r, anthropic.types.Message)]
    refused = [r for r in results if isinstance(r, anthropic.BadRequestError)]
    assert len(answered) + len(refused) == 24, [r for r in results if r not in answered + refused]
    assert answered and refused
    assert all(r.body["error"]["type"] == "invalid_request_error" and "budget" in r.body["error"]["message"]
               for r in refused)
    assert gw.total_cost_usd <= 0.50, f"spent ${gw.total_cost_usd} of a $0.50 budget"
    assert gw.budget_spent
    assert len(SpendingUpstream.seen) == len(answered)  # a refused request never reaches the upstream


def test_parallel_responses_never_spend_past_the_budget(upstream) -> None:
    with Gateway(upstream=upstream, max_cost_usd=0.50) as gw:
        sdk = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0)

        def call(i: int):
            limit = {"max_output_tokens": 20_000} if i % 2 else {}  # Codex sets none
            return sdk.responses.create(model=CODEX_MODEL, input=PROMPT, **limit)

        results = in_parallel(16, call)
    answered = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, openai.APIStatusError)]
    assert len(answered) + len(refused) == 16, [r for r in results if r not in answered + refused]
    assert answered and refused
    # OpenAI's own shape for money that is gone: 429 insufficient_quota, which Codex does not retry.
    assert all(r.status_code == 429 and r.code == "insufficient_quota" and "budget" in r.message for r in refused)
    assert gw.total_cost_usd <= 0.50, f"spent ${gw.total_cost_usd} of a $0.50 budget"
    assert gw.budget_spent


def test_a_request_with_no_or_an_absurd_limit_is_bounded_by_the_cap(upstream) -> None:
    with Gateway(upstream=upstream, max_cost_usd=100.0) as gw:
        sdk = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
        with sdk.messages.stream(model=MODEL, max_tokens=50_000_000, messages=[{"role": "user", "content": "hi"}]) as s:
            s.get_final_message()
        openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0).responses.create(
            model=CODEX_MODEL, input="hi")
    assert [b.get("max_tokens", b.get("max_output_tokens")) for b in SpendingUpstream.seen] == [OUTPUT_CAP_TOKENS] * 2
    assert gw.total_cost_usd < 2 * pricing.cost_usd("claude-opus-4-1", 1000, OUTPUT_CAP_TOKENS)


def test_near_the_end_of_the_budget_a_request_gets_what_is_left(upstream) -> None:
    """A limit the budget cannot pay for shrinks to what is left; a reply too small to be useful is refused."""
    with Gateway(upstream=upstream, max_cost_usd=0.06) as gw:
        sdk = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
        ask = dict(model=MODEL, max_tokens=32_000, messages=[{"role": "user", "content": "hi"}])
        with sdk.messages.stream(**ask) as stream:  # worth $0.48: shrunk to about 4,000 tokens
            stream.get_final_message()
        with pytest.raises(anthropic.BadRequestError, match="budget"), sdk.messages.stream(**ask) as stream:
            stream.get_final_message()
    (seen,) = SpendingUpstream.seen
    assert 1024 <= seen["max_tokens"] < 4000
    assert gw.total_cost_usd <= 0.06 and gw.budget_spent


def test_an_answer_cut_short_by_the_budget_marks_it_spent(upstream) -> None:
    """A model that ran into a limit the budget set (not the agent) may have failed for it: the trial is unscored."""
    with Gateway(upstream=upstream, max_cost_usd=0.40) as gw:
        sdk = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
        sdk.messages.create(model=MODEL, max_tokens=1000, messages=[{"role": "user", "content": "hi"}])
        assert not gw.budget_spent  # it hit its own limit
        with sdk.messages.stream(model=MODEL, max_tokens=32_000, messages=[{"role": "user", "content": "hi"}]) as s:
            assert s.get_final_message().stop_reason == "max_tokens"
    assert SpendingUpstream.seen[1]["max_tokens"] < 32_000
    assert gw.budget_spent and len(gw.calls) == 2


def test_thinking_budget_shrinks_with_max_tokens(upstream) -> None:
    """Claude Code asks for max_tokens 32,000 with thinking; the API needs budget_tokens < max_tokens."""
    with Gateway(upstream=upstream, max_cost_usd=0.20) as gw:
        with anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0).messages.stream(
                model=MODEL, max_tokens=32_000, thinking={"type": "enabled", "budget_tokens": 31_999},
                messages=[{"role": "user", "content": "hi"}]) as stream:
            stream.get_final_message()
    (seen,) = SpendingUpstream.seen
    assert 1024 <= seen["thinking"]["budget_tokens"] < seen["max_tokens"] < 32_000


def test_an_agent_that_hangs_up_mid_stream_is_charged_its_worst_case(upstream) -> None:
    """Hanging up before the final usage must not make a call cheap: what the model wrote is unknown, and billed."""
    SpendingUpstream.stall_s = 1.0
    try:
        with Gateway(upstream=upstream, max_cost_usd=0.50) as gw:
            sdk = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
            for hung_up in range(10):
                try:
                    with sdk.messages.stream(model=MODEL, max_tokens=8000,
                                             messages=[{"role": "user", "content": PROMPT}]) as stream:
                        next(iter(stream))  # message_start, then hang up
                except anthropic.BadRequestError as exc:
                    assert "budget" in str(exc)
                    break
                deadline = time.monotonic() + 5
                while len(gw.calls) <= hung_up and time.monotonic() < deadline:  # the gateway sees the hang-up
                    time.sleep(0.05)
    finally:
        SpendingUpstream.stall_s = 0.0
    assert 1 <= len(gw.calls) == hung_up < 10  # with only the input charged, all ten would have been answered
    worst = pricing.cost_usd(MODEL, 0, 8000)
    assert all(c.cost_usd >= worst for c in gw.calls), [c.cost_usd for c in gw.calls]
    assert gw.total_cost_usd <= 0.50 and gw.budget_spent


def test_background_responses_cannot_run_past_the_budget(upstream) -> None:
    """A background response answers ``queued`` with no usage and is billed later, out of the gateway's sight."""
    with Gateway(upstream=upstream, max_cost_usd=0.50) as gw:
        sdk = openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0)
        answered = 0
        for _ in range(20):
            try:
                sdk.responses.create(model=CODEX_MODEL, input=PROMPT, background=True, max_output_tokens=20_000)
            except openai.APIStatusError as exc:
                assert exc.status_code == 429 and "budget" in exc.message
                break
            answered += 1
    worst = pricing.cost_usd(CODEX_MODEL, len(PROMPT), 20_000)
    assert answered * worst <= 0.50 + worst, f"{answered} background responses of up to ${worst:.2f} each"
    assert gw.total_cost_usd <= 0.50


BASH_TOOL = {"name": "bash", "description": "run a command",
             "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}


def test_server_tools_never_reach_the_upstream(upstream) -> None:
    """Web search and fetch, code execution and MCP run at the provider: network outside the sandbox, cost outside
    the tokens. The agent's own tools (custom ones, and the client-run bash/editor types) pass."""
    with Gateway(upstream=upstream, max_cost_usd=5.0) as gw:
        anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0).messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}],
            tools=[BASH_TOOL, {"type": "bash_20250124", "name": "bash2"},
                   {"type": "web_search_20250305", "name": "web_search", "max_uses": 500},
                   {"type": "web_fetch_20250910", "name": "web_fetch"},
                   {"type": "code_execution_20250825", "name": "code_execution"},
                   {"type": "mcp_toolset", "mcp_server_name": "evil"}],
            extra_body={"mcp_servers": [{"type": "url", "url": "https://evil.example/mcp", "name": "evil"}],
                        "container": "cntr_1"})
        openai.OpenAI(base_url=gw.url + "/v1", api_key=gw.token, max_retries=0).responses.create(
            model=CODEX_MODEL, input="hi", max_output_tokens=100,
            tools=[{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {}}},
                   {"type": "web_search"}, {"type": "code_interpreter", "container": {"type": "auto"}},
                   {"type": "mcp", "server_label": "evil", "server_url": "https://evil.example/mcp"},
                   {"type": "file_search", "vector_store_ids": ["vs_1"]}, {"type": "image_generation"}])
    messages, responses = SpendingUpstream.seen
    assert [t.get("type", "custom") for t in messages["tools"]] == ["custom", "bash_20250124"]
    assert "mcp_servers" not in messages and "container" not in messages
    assert [t["type"] for t in responses["tools"]] == ["function"]


# -- a whole trial ----------------------------------------------------------------------------

PARALLEL_AGENT = '''
import os, sys
from concurrent.futures import ThreadPoolExecutor
import anthropic

client = anthropic.Anthropic(base_url=os.environ["ANTHROPIC_BASE_URL"], api_key=os.environ["ANTHROPIC_API_KEY"],
                             max_retries=0)
def ask(i):
    try:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=8000,
                               messages=[{"role": "user", "content": sys.argv[1] * 50}])
        return "ok"
    except anthropic.APIStatusError as exc:
        return str(exc.status_code)
with ThreadPoolExecutor(20) as pool:
    print(list(pool.map(ask, range(20))))
open("done.txt", "w").write("done")
'''


def test_a_trial_that_spends_in_parallel_ends_unscored_on_budget(upstream, make_scenario, opts, tmp_path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(PARALLEL_AGENT)
    loaded = make_scenario(pass_if=[{"succeeds": {"run": "test -f done.txt"}}], budget={"max_cost_usd": 0.50})
    template = f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))} {{task}}"
    result = run_trial(loaded, "", opts(agent="command", command=template, model=MODEL, api_key=REAL_KEY,
                                        upstream_url=upstream.base_url), 0)
    assert result.cost_usd <= 0.50, f"spent ${result.cost_usd} of a $0.50 budget"
    assert (result.verdict, result.agent_status) == ("unscored", "budget"), result.reason
    assert result.checks == [] and "budget" in result.reason


def test_a_huge_body_is_refused_unread(upstream) -> None:
    """The harness is bound too: a body past the API's own 32 MB limit is not read into memory."""
    with Gateway(upstream=upstream, max_cost_usd=0.50) as gw:
        with socket.create_connection(("127.0.0.1", gw.port), timeout=5) as sock:
            sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                         b"x-api-key: " + gw.token.encode() + b"\r\ncontent-length: 10000000000\r\n\r\n{")
            answer = b""
            while chunk := sock.recv(65536):  # the gateway closes the connection after its answer
                answer += chunk
            answer = answer.decode()
    assert answer.startswith("HTTP/1.1 413") and "request_too_large" in answer
    assert gw.calls == [] and SpendingUpstream.seen == []
