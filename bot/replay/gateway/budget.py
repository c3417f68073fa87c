"""A replay run's model budget, held by the gateway against parallel requests.

Each request reserves its worst case before it is answered (``Budget.reserve``)
and settles to its real cost when the answer is recorded (``Budget.settle``),
all under one lock, so requests in flight together cannot spend the budget
twice. The worst case is bounded by the gateway itself: the request is
forwarded with an output limit the budget pays for, and without the tools
the provider runs (whose cost is not in the tokens).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from bot.model import pricing

log = logging.getLogger(__name__)

OUTPUT_CAP_TOKENS = 32_000  # a request asking for more (or setting no limit) is forwarded with this limit
MIN_OUTPUT_TOKENS = 1_024  # a request the budget pays less than this for is refused (or its own limit, if smaller)
_MIN_THINKING_TOKENS = 1_024  # the Messages API's least thinking.budget_tokens
_BYTES_PER_INPUT_TOKEN = 3  # input estimate from the body's size: more tokens than English or code has
CUT_SHORT = ("max_tokens", "incomplete")  # stop reasons (Responses: statuses) of an answer that hit its limit
UNFINISHED = (None, "queued", "in_progress")  # stop reasons (Responses: statuses) of an answer not yet done

# Tools the agent itself runs (their calls come back to it); any other tool runs at the provider (web search and
# fetch, code execution, MCP, file search, image generation): network outside the sandbox, cost outside the tokens.
_CLIENT_TOOL_PREFIXES = ("bash_", "text_editor_", "computer_", "memory_")  # Messages API types the client runs
_CLIENT_RESPONSES_TOOLS = ("function", "custom", "local_shell", "shell", "apply_patch", "computer_use_preview")
_PROVIDER_FIELDS = ("mcp_servers", "container")  # Messages API: remote MCP servers, a code-execution container


@dataclass
class Reservation:
    """What one admitted request may spend at most; settled to its real cost when it is recorded."""

    usd: float
    output_tokens: int
    settled: bool = False
    cut_by_budget: bool = False  # the output limit is lower than asked because the budget pays for no more


def _limit_key(responses: bool) -> str:
    return "max_output_tokens" if responses else "max_tokens"


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _thinking_budget(request: dict[str, Any]) -> int | None:
    thinking = request.get("thinking")
    return _positive_int(thinking.get("budget_tokens")) if isinstance(thinking, dict) else None


def with_output_limit(request: dict[str, Any], responses: bool, tokens: int) -> dict[str, Any]:
    """``request`` limited to ``tokens`` of output; a thinking budget shrinks to stay below it, as the API requires."""
    out = {**request, _limit_key(responses): tokens}
    thinking = _thinking_budget(request)
    if thinking is not None and thinking >= tokens:
        out["thinking"] = {**request["thinking"], "budget_tokens": tokens - 1}
    return out


def _client_tool(tool: Any, responses: bool) -> bool:
    if not isinstance(tool, dict):
        return False
    kind = tool.get("type")
    if responses:
        return kind in _CLIENT_RESPONSES_TOOLS
    return kind in (None, "custom") or (isinstance(kind, str) and kind.startswith(_CLIENT_TOOL_PREFIXES))


def without_provider_tools(request: dict[str, Any], responses: bool) -> dict[str, Any]:
    """``request`` with only the tools the agent runs itself; the same object when it has no other.

    A tool the provider runs would reach the network from outside the sandbox
    (a fixture can ask the model to fetch a URL with a file's content in it)
    and costs per use, outside the tokens the budget counts; the model simply
    is not offered it.
    """
    tools = request.get("tools") if isinstance(request.get("tools"), list) else []
    dropped = [t for t in tools if not _client_tool(t, responses)]
    fields = [] if responses else [f for f in _PROVIDER_FIELDS if f in request]
    if not dropped and not fields:
        return request
    log.warning("gateway: removed provider-run tools %s and fields %s from a request",
                [t.get("type") if isinstance(t, dict) else t for t in dropped], fields)
    out = {k: v for k, v in request.items() if k not in fields}
    if dropped:
        out["tools"] = [t for t in tools if _client_tool(t, responses)]
    return out


class Budget:
    """The dollars one run may spend on its model, ``None`` for no limit; thread-safe."""

    def __init__(self, max_usd: float | None) -> None:
        self.max_usd = max_usd
        self.spent = False  # a request was refused, or an answer ran into a limit the budget set
        self._settled_usd = 0.0
        self._reserved_usd = 0.0  # worst cases of the requests in flight
        self._lock = threading.Lock()

    def reserve(self, request: dict[str, Any], raw: bytes, *, model: str,
                responses: bool = False) -> tuple[Reservation, dict[str, Any]] | None:
        """Reserve the worst case of one request before it is answered; None: refuse it, the budget is spent.

        The worst case is the input at the cache-write price (the dearest
        input), estimated as one token per ``_BYTES_PER_INPUT_TOKEN`` bytes of
        the body, plus the output limit at the output price of ``model``
        (``pricing.price_for``). The output limit is the request's
        ``max_tokens`` (``max_output_tokens`` for the Responses API), at most
        ``OUTPUT_CAP_TOKENS``, and at most what the budget left after the open
        reservations pays for; the request to answer carries that limit (a
        missing one is set), so the model cannot write past it. When the budget
        pays for less than ``MIN_OUTPUT_TOKENS`` (or the request's own smaller
        limit), the request is refused and ``spent`` set. The budget can be
        passed only by an upstream that counts more input tokens than the
        estimate. Without a budget nothing is reserved or changed.
        """
        asked = _positive_int(request.get(_limit_key(responses)))
        if self.max_usd is None:
            return Reservation(0.0, asked or 0), request
        price = pricing.price_for(model)
        input_usd = -(-len(raw) // _BYTES_PER_INPUT_TOKEN) * price.cache_write_per_mtok / 1e6
        wanted = min(asked or OUTPUT_CAP_TOKENS, OUTPUT_CAP_TOKENS)
        least = min(wanted, MIN_OUTPUT_TOKENS)
        if _thinking_budget(request) is not None:
            least = max(least, _MIN_THINKING_TOKENS + 1)
        with self._lock:
            left = self.max_usd - self._settled_usd - self._reserved_usd - input_usd
            if price.output_per_mtok <= 0:  # a free model (`local`): the dollar budget never binds its output
                tokens = wanted
            else:
                tokens = min(wanted, int(left * 1e6 / price.output_per_mtok) if left > 0 else 0)
            if tokens < least:
                self.spent = True
                return None
            grant = Reservation(input_usd + tokens * price.output_per_mtok / 1e6, tokens, cut_by_budget=tokens < wanted)
            self._reserved_usd += grant.usd
        return grant, (request if tokens == asked else with_output_limit(request, responses, tokens))

    def settle(self, grant: Reservation | None, cost_usd: float, stop_reason: str | None, *,
               unfinished: bool = False) -> float:
        """The cost to record for an answer, which replaces its reservation.

        ``unfinished`` (a stream that ended before its final usage, a
        background answer still queued) costs the reservation: the model may
        have written up to its limit, and that is billed. An answer that ran
        into a limit the budget lowered sets ``spent``: it may have failed for it.
        """
        if grant is not None and unfinished:
            cost_usd = max(cost_usd, round(grant.usd, 8))
        with self._lock:
            self._settled_usd += cost_usd
            if grant is not None and not grant.settled:
                grant.settled = True
                self._reserved_usd -= grant.usd
            if grant is not None and grant.cut_by_budget and stop_reason in CUT_SHORT:
                self.spent = True
        return cost_usd

    def release(self, grant: Reservation) -> None:
        """Give back a reservation that was never settled (the request ended without an answer)."""
        with self._lock:
            if not grant.settled:
                grant.settled = True
                self._reserved_usd -= grant.usd
