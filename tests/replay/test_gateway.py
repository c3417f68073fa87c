"""The model gateway, driven by the real anthropic SDK and raw HTTP."""

from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlsplit

import anthropic
import pytest
from support.servers import Handler, recorded

from bot.model import pricing
from bot.replay.gateway.policy import parse_policy
from bot.replay.gateway.server import Gateway, ModelCall, Upstream

MODEL = "claude-sonnet-4-6"
RULE = "Always use the package-local test config."
BASH_TOOL = {"name": "bash", "description": "Run a shell command",
             "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
POLICY = parse_policy({
    "branch_on": "package-local test config",
    "with_rule": [{"bash": "cd packages/api && pytest -q"}, {"say": "Fixed it. [rule-0001]"}],
    "without_rule": [{"bash": "pytest -q"}, {"bash": "curl -s $FLAKY_URL", "repeat": 2}, {"say": "Done."}],
})
REAL_KEY = "sk-ant-REAL-KEY-never-shown-to-agents"


@pytest.fixture
def gateway():
    with Gateway(POLICY) as gw:
        yield gw


def client(gw: Gateway, **kw) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key=gw.token, **kw)


def ask(c: anthropic.Anthropic, messages, system=RULE, **kw):
    return c.messages.create(model=MODEL, max_tokens=256, system=system, messages=messages, tools=[BASH_TOOL], **kw)


def raw_post(gw: Gateway, path: str, body: dict, headers: dict) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(urlsplit(gw.url).netloc, timeout=5)
    conn.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json", **headers})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


# --- scripted mode through the SDK ---------------------------------------


def test_non_streaming_tool_use_round_trip(gateway: Gateway) -> None:
    c = client(gateway)
    messages = [{"role": "user", "content": "Fix the failing test"}]
    first = ask(c, messages)
    assert first.model == "simulated" and first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert (use.name, use.input) == ("bash", {"command": "cd packages/api && pytest -q"})

    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "3 passed"}]},
    ]
    second = ask(c, messages)
    assert second.stop_reason == "end_turn"
    assert second.content[0].text == "[SIMULATED] Fixed it. [rule-0001]"

    assert [(k.model, k.simulated, k.status, k.branch) for k in gateway.calls] == [(MODEL, True, 200, "with_rule")] * 2
    assert gateway.calls[0].input_tokens == first.usage.input_tokens
    assert gateway.calls[1].input_tokens > gateway.calls[0].input_tokens  # the conversation grew


def test_stream_helper_assembles_tool_use_and_usage(gateway: Gateway) -> None:
    c = client(gateway)
    with c.messages.stream(model=MODEL, max_tokens=256, system="no rule", tools=[BASH_TOOL],
                           messages=[{"role": "user", "content": "go"}]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    use = next(b for b in final.content if b.type == "tool_use")
    assert use.input == {"command": "pytest -q"}
    [call] = gateway.calls
    assert call.stream and call.branch == "without_rule"
    assert (call.input_tokens, call.output_tokens) == (final.usage.input_tokens, final.usage.output_tokens)
    assert call.output_tokens > 1  # the message_delta count replaced message_start's placeholder


def test_create_stream_true_yields_sse_events_in_order(gateway: Gateway) -> None:
    events = list(ask(client(gateway), [{"role": "user", "content": "go"}], stream=True))
    types = [e.type for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert events[0].message.usage.input_tokens > 0
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert {"text_delta", "input_json_delta"} <= set(deltas)
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens > 0


def test_count_tokens_estimates(gateway: Gateway) -> None:
    result = client(gateway).messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "x" * 400}])
    assert 100 <= result.input_tokens <= 130
    assert gateway.calls == []  # counting is not a model call


# --- auth, routes, probes -----------------------------------------------


def test_sdk_bearer_auth_and_x_api_key_both_work(gateway: Gateway) -> None:
    bearer = anthropic.Anthropic(base_url=gateway.url, auth_token=gateway.token)
    assert ask(bearer, [{"role": "user", "content": "go"}]).stop_reason == "tool_use"
    status, body = raw_post(gateway, "/v1/messages?beta=true",
                            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
                            {"x-api-key": gateway.token, "anthropic-version": "2023-06-01"})
    assert status == 200 and body["type"] == "message"


def test_wrong_or_missing_token_is_401_in_anthropic_shape(gateway: Gateway) -> None:
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=gateway.url, api_key="wrong", max_retries=0).messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    status, body = raw_post(gateway, "/v1/messages", {}, {})
    assert status == 401
    assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
    assert gateway.calls == []


def test_unknown_paths_404_and_probes_answer(gateway: Gateway) -> None:
    status, body = raw_post(gateway, "/v1/complete", {}, {"x-api-key": gateway.token})
    assert status == 404 and body["error"]["type"] == "not_found_error"
    conn = http.client.HTTPConnection(urlsplit(gateway.url).netloc, timeout=5)
    for method, expected in (("HEAD", 200), ("GET", 200)):
        conn.request(method, "/")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == expected
    conn.request("GET", "/v1/models")
    resp = conn.getresponse()
    assert resp.status == 404 and json.loads(resp.read())["type"] == "error"
    conn.close()


def test_bad_json_is_400(gateway: Gateway) -> None:
    conn = http.client.HTTPConnection(urlsplit(gateway.url).netloc, timeout=5)
    conn.request("POST", "/v1/messages", body=b"{nope", headers={"x-api-key": gateway.token})
    resp = conn.getresponse()
    assert resp.status == 400 and json.loads(resp.read())["error"]["type"] == "invalid_request_error"


# --- failures, latency, callback, shutdown ----------------------------------


def test_injected_failures_are_retried_by_the_sdk_and_counted() -> None:
    seen: list[ModelCall] = []
    with Gateway(POLICY, fail_next=[529, 500], on_call=seen.append) as gw:
        message = ask(client(gw), [{"role": "user", "content": "go"}])
    assert message.stop_reason == "tool_use"
    assert [c.status for c in gw.calls] == [529, 500, 200]
    assert [c.input_tokens for c in gw.calls[:2]] == [0, 0] and gw.calls[2].input_tokens > 0
    assert gw.total_cost_usd == gw.calls[2].cost_usd > 0
    assert seen == gw.calls


def test_failure_without_retries_reaches_the_agent() -> None:
    with Gateway(POLICY, fail_next=[529]) as gw:
        with pytest.raises(anthropic.InternalServerError) as err:
            ask(client(gw, max_retries=0), [{"role": "user", "content": "go"}])
    assert err.value.status_code == 529
    assert err.value.body["error"]["type"] == "overloaded_error"


def test_latency_delays_each_answer() -> None:
    with Gateway(POLICY, latency_s=0.2) as gw:
        started = time.monotonic()
        ask(client(gw), [{"role": "user", "content": "go"}])
        assert time.monotonic() - started >= 0.2
    assert gw.calls[0].duration_ms >= 200


def test_close_leaves_no_threads_even_with_keep_alive_connections() -> None:
    before = set(threading.enumerate())
    gw = Gateway(POLICY)
    c = client(gw)
    ask(c, [{"role": "user", "content": "go"}])  # httpx keeps this connection open
    gw.close()
    gw.close()  # idempotent
    assert set(threading.enumerate()) - before == set()
    c.close()


def test_sequential_calls_reuse_the_servers_threads() -> None:
    """The builtin agent opens a connection per call: they are served by the threads already there, not a
    thread started for each (at most one waits while another serves)."""
    served: set[threading.Thread] = set()  # the objects, not their idents: a new thread may reuse an ident
    with Gateway(POLICY, on_call=lambda call: served.add(threading.current_thread())) as gw:
        for _ in range(6):
            status, _ = raw_post(gw, "/v1/messages", {"model": MODEL, "max_tokens": 16, "messages": [
                {"role": "user", "content": "go"}]}, {"x-api-key": gw.token})
            assert status == 200
            deadline = time.monotonic() + 5  # as between an agent's calls: the server has seen the close
            while gw._server._open and time.monotonic() < deadline:
                time.sleep(0.001)
    assert len(gw.calls) == 6 and len(served) <= 2


def test_connections_held_open_are_each_served_at_once() -> None:
    """A connection an agent keeps open (keep-alive) holds its thread; the next one is served by another, even
    with three held, and closing the gateway ends them all."""
    before = set(threading.enumerate())
    gw = Gateway(POLICY)
    held = []
    for _ in range(3):
        conn = http.client.HTTPConnection(urlsplit(gw.url).netloc, timeout=5)
        body = json.dumps({"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "go"}]})
        conn.request("POST", "/v1/messages", body=body, headers={"content-type": "application/json",
                                                                  "x-api-key": gw.token})
        assert conn.getresponse().read() and conn.sock is not None  # answered, and still open
        held.append(conn)
    assert len(gw.calls) == 3
    gw.close()
    assert set(threading.enumerate()) - before == set()
    for conn in held:
        conn.close()


def test_a_gateway_starts_without_looking_its_address_up(monkeypatch) -> None:
    """http.server names itself by a reverse lookup (/etc/hosts, or a DNS server) that nothing here reads."""
    import socket

    def no_lookup(name: str = "") -> str:
        raise AssertionError(f"looked up {name!r}")

    monkeypatch.setattr(socket, "getfqdn", no_lookup)
    with Gateway(POLICY) as gw:
        status, _ = raw_post(gw, "/v1/messages", {"model": MODEL, "max_tokens": 16, "messages": [
            {"role": "user", "content": "go"}]}, {"x-api-key": gw.token})
    assert status == 200


def test_callback_errors_are_kept_and_do_not_break_the_agent() -> None:
    def boom(call: ModelCall) -> None:
        raise RuntimeError("trace is full")

    with Gateway(POLICY, on_call=boom) as gw:
        assert ask(client(gw), [{"role": "user", "content": "go"}]).stop_reason == "tool_use"
    assert [str(e) for e in gw.callback_errors] == ["trace is full"]


def test_gateway_needs_exactly_one_mode() -> None:
    with pytest.raises(ValueError):
        Gateway()
    with pytest.raises(ValueError):
        Gateway(POLICY, upstream=Upstream(REAL_KEY))


def test_agent_env_points_at_the_gateway(gateway: Gateway) -> None:
    env = gateway.agent_env()
    assert env == {"ANTHROPIC_BASE_URL": gateway.url, "ANTHROPIC_API_KEY": gateway.token,
                   "OPENAI_BASE_URL": gateway.url + "/v1", "OPENAI_API_KEY": gateway.token}


# --- upstream mode --------------------------------------------------------


class FakeAnthropic(Handler):
    """A fake Messages API that checks the key and (badly) echoes it back, as a leak test."""

    protocol_version = "HTTP/1.1"
    received: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.body())
        self.received.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
        if self.headers.get("x-api-key") != REAL_KEY:
            return self.reply_json(401, {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}})
        leak = f"upstream saw key {self.headers['x-api-key']}"
        message = {"id": "msg_up", "type": "message", "role": "assistant", "model": body["model"],
                   "content": [{"type": "text", "text": leak}], "stop_reason": "end_turn", "stop_sequence": None,
                   "usage": {"input_tokens": 1000, "output_tokens": 200, "cache_read_input_tokens": 5000}}
        if not body.get("stream"):
            return self.reply_json(200, message)
        start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
        events = [
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": leak}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
             "usage": {"output_tokens": 200}},
            {"type": "message_stop"},
        ]
        self.reply_events(events)


upstream = recorded(FakeAnthropic)


def test_upstream_forwards_with_real_key_and_counts_usage(upstream) -> None:
    url, received = upstream
    with Gateway(upstream=Upstream(REAL_KEY, base_url=url)) as gw:
        message = ask(client(gw), [{"role": "user", "content": "hi"}])
    assert REAL_KEY not in message.model_dump_json()
    assert "[redacted]" in message.content[0].text
    [seen] = received
    assert seen["path"] == "/v1/messages" and seen["body"]["model"] == MODEL
    assert seen["headers"]["anthropic-version"] == anthropic.Anthropic(api_key="x").default_headers["anthropic-version"]
    assert gw.token not in json.dumps(seen["headers"])  # the agent's token stays at the gateway
    [call] = gw.calls
    assert (call.input_tokens, call.output_tokens, call.cache_read_input_tokens) == (1000, 200, 5000)
    assert not call.simulated and call.status == 200 and call.model == MODEL
    expected = pricing.cost_usd(MODEL, 1000, 200, cache_read_input_tokens=5000)
    assert call.cost_usd == expected == pytest.approx((1000 * 3 + 200 * 15 + 5000 * 0.3) / 1e6)


def test_upstream_stream_is_passed_through_and_counted(upstream) -> None:
    url, _ = upstream
    with Gateway(upstream=Upstream(REAL_KEY, base_url=url)) as gw:
        with client(gw).messages.stream(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
    assert text.startswith("upstream saw key ") and REAL_KEY not in text
    assert final.stop_reason == "end_turn"
    [call] = gw.calls
    assert call.stream and (call.input_tokens, call.output_tokens) == (1000, 200)
    assert call.stop_reason == "end_turn" and call.cost_usd > 0


def test_upstream_errors_and_unreachable_upstream(upstream) -> None:
    url, _ = upstream
    with Gateway(upstream=Upstream("sk-ant-wrong", base_url=url)) as gw:
        with pytest.raises(anthropic.AuthenticationError):
            ask(client(gw), [{"role": "user", "content": "hi"}])
    assert [c.status for c in gw.calls] == [401]
    with Gateway(upstream=Upstream(REAL_KEY, base_url="http://127.0.0.1:9", timeout_s=2)) as gw:
        with pytest.raises(anthropic.InternalServerError) as err:
            ask(client(gw, max_retries=0), [{"role": "user", "content": "hi"}])
    assert err.value.status_code == 502
    assert REAL_KEY not in repr(gw.__dict__)


# --- pricing ----------------------------------------------------------------


def test_pricing_known_dated_family_and_default() -> None:
    assert pricing.price_for("claude-sonnet-4-5-20250929") == pricing.PRICES["claude-sonnet-4-5"]
    assert pricing.price_for("claude-opus-4-20250514").input_per_mtok == 15.0
    assert pricing.price_for("claude-haiku-9") == pricing.FAMILY_PRICES["haiku"]
    assert pricing.price_for("simulated") == pricing.DEFAULT_PRICE
    assert not pricing.is_known("simulated") and pricing.is_known("claude-3-5-haiku-latest")
    assert pricing.cost_usd("claude-opus-4-1", 1_000_000, 1_000_000) == 90.0
    assert pricing.cost_usd("simulated", 1_000_000, 0, cache_creation_input_tokens=1_000_000) == 3.0 + 3.75


def test_a_spent_budget_refuses_further_calls():
    """Each call reserves its worst case (here max_tokens=50); once the rest cannot pay for one, calls are refused."""
    policy = parse_policy({"branch_on": "x", "with_rule": [{"say": "hi"}], "without_rule": [{"bash": "ls", "repeat": 50}]})
    with Gateway(policy, max_cost_usd=0.003) as gw:
        sdk = anthropic.Anthropic(base_url=gw.url, api_key=gw.token, max_retries=0)
        for answered in range(50):
            try:
                sdk.messages.create(model="simulated", max_tokens=50, messages=[{"role": "user", "content": "go"}])
            except anthropic.BadRequestError as exc:
                assert "budget" in str(exc)
                break
        else:
            raise AssertionError("calls past the budget were answered")
    assert answered >= 1 and len(gw.calls) == answered
    assert gw.budget_spent and 0 < gw.total_cost_usd <= 0.003
