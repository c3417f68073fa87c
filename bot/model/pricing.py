"""Model prices and the cost of one model call.

Prices are US dollars per million tokens, as published for the Claude API.
Cache writes cost 1.25x the input price and cache reads 0.1x (5-minute cache).

A model id that is not in the table is priced by its family when the id
names one (``claude-opus-*``, ``claude-sonnet-*``, ``claude-haiku-*``: the
newest known price of that family), else at ``DEFAULT_PRICE``, a Sonnet-class
price; ``simulated`` (offline replays) gets ``DEFAULT_PRICE``, and ``local`` (the real
model served on this machine, ``bot.model.served``) costs nothing: its cost is its tokens and CPU
seconds. That
keeps budgets biting in simulated runs, but a simulated cost is an *estimate*
built on estimated token counts: compare it with other simulated costs only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    @property
    def cache_write_per_mtok(self) -> float:
        return self.input_per_mtok * 1.25

    @property
    def cache_read_per_mtok(self) -> float:
        return self.input_per_mtok * 0.1


# Keys are model ids without a date suffix; `price_for` strips it.
PRICES: dict[str, Price] = {
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-sonnet-4-6": Price(3.0, 15.0),
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4-0": Price(15.0, 75.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4-5": Price(3.0, 15.0),
    "claude-sonnet-4-0": Price(3.0, 15.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-3-5-sonnet": Price(3.0, 15.0),
    "claude-haiku-4-5": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.80, 4.0),
    "claude-3-opus": Price(15.0, 75.0),
    "claude-3-haiku": Price(0.25, 1.25),
    # OpenAI, for Codex CLI upstream (openai.com/api/pricing; cached input is 0.1x there too).
    "gpt-5": Price(1.25, 10.0),
    "gpt-5-codex": Price(1.25, 10.0),
    "gpt-5-mini": Price(0.25, 2.0),
    # The open-weights model run on this machine (`--model local`): no money, only tokens and CPU seconds.
    "local": Price(0.0, 0.0),
}

# Unknown ids of a known family: the newest price of that family.
FAMILY_PRICES: dict[str, Price] = {
    "opus": Price(5.0, 25.0),
    "sonnet": Price(3.0, 15.0),
    "haiku": Price(1.0, 5.0),
}

# Used for `simulated` and for any other id (documented in the module).
DEFAULT_PRICE = Price(3.0, 15.0)

# "claude-sonnet-4-5-20250929", "claude-3-5-haiku-latest", "claude-opus-4@20250514"
_SUFFIX = re.compile(r"(?:[-@]\d{8}|-latest)$")


def base_model_id(model: str) -> str:
    """The model id without its date or ``-latest`` suffix."""
    return _SUFFIX.sub("", model.strip())


def is_known(model: str) -> bool:
    """True when the model has its own price (not the default)."""
    return base_model_id(model) in PRICES


def price_for(model: str) -> Price:
    """The model's price; for other ids its family's, else ``DEFAULT_PRICE``."""
    base = base_model_id(model)
    if base in PRICES:
        return PRICES[base]
    family = next((f for f in FAMILY_PRICES if f in base.split("-")), None)
    return FAMILY_PRICES[family] if family else DEFAULT_PRICE


def cost_usd(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> float:
    """Dollar cost of one call; ``input_tokens`` excludes the cached ones, as the API reports."""
    price = price_for(model)
    dollars = (
        input_tokens * price.input_per_mtok
        + output_tokens * price.output_per_mtok
        + cache_creation_input_tokens * price.cache_write_per_mtok
        + cache_read_input_tokens * price.cache_read_per_mtok
    ) / 1_000_000
    return round(dollars, 8)
