"""The SIMULATED analyst and distiller: scripted, seeded answers, not a real LLM.

They sit behind a real ``Gateway`` and answer the real prompts of
``bot/model/prompts/capture.j2`` and ``distill.j2`` through the anthropic SDK, as
the demo's answer book does; what they answer is read from the prompt
itself (the task of each incident names its mode).

The distiller is imperfect on purpose, and the imperfections are parameters:
with ``p_redundant`` it proposes a rule the agent already follows (replayed on
a scenario the agent passes anyway: the seed's "about a quarter" rejected as
not discriminative), with ``p_harmful`` a rule that also tells the agent to run
only the changed module's tests, which breaks ``whole-suite-after-change``.
Each mode's k-th proposal is drawn from (seed, mode, k) alone, so every policy
sees the same proposals for the same mistakes.
"""

from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import dataclass, field
from typing import Any

import yaml

from bot.replay.gateway.answers import _last_user_text
from bot.replay.gateway.policy import (
    SIM_TAG,
    SIMULATED_MODEL,
    Reply,
    estimate_input_tokens,
    estimate_tokens,
)
from loopbench.catalogue import HARM_PHRASE, VICTIM, Mode

_INCIDENT = re.compile(r"<incident>\s*(`{3,})text\n(.*?)\n\1\s*</incident>", re.S)
REDUNDANT_SCENARIOS = (VICTIM, "read-before-edit")


@dataclass
class DistillerConfig:
    p_redundant: float = 0.25
    p_harmful: float = 0.10

    def as_dict(self) -> dict:
        return {"p_redundant": self.p_redundant, "p_harmful": self.p_harmful}


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def harmful_text(rule: str) -> str:
    """The good rule with the harmful instruction folded into its last sentence."""
    return rule.rstrip().rstrip(".") + f", and then {HARM_PHRASE}, not the whole suite."


def redundant_text(mode: Mode, k: int) -> tuple[str, str]:
    """A rule the agent already follows, worded for this mode, and the scenario the distiller replays it on."""
    topic = _norm(mode.task).rstrip(".")
    if k % 2 == 0:
        return (f"When a task asks to {topic[0].lower() + topic[1:]}, read each file you change before you edit it, "
                "so the change fits the code around it.", "read-before-edit")
    return (f"After a change like \"{topic}\", run the whole test suite before you report the task done, "
            "not only the tests of the file you changed.", VICTIM)


@dataclass
class SimulatedModel:
    """Answers capture and distill prompts for one policy's run (its own counters)."""

    modes: dict[str, Mode]
    seed: int
    config: DistillerConfig = field(default_factory=DistillerConfig)
    kinds: dict[str, str] = field(default_factory=dict)  # proposed rule text -> good | redundant | harmful
    proposed: dict[str, int] = field(default_factory=dict)  # mode -> proposals so far
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._by_task = {_norm(m.task): m for m in self.modes.values()}

    def mode_of(self, text: str) -> Mode | None:
        norm = _norm(text)
        return self._by_task.get(norm) or next((m for t, m in self._by_task.items() if t in norm), None)

    def respond(self, request: dict[str, Any]) -> Reply:
        prompt = _last_user_text(request)
        with self._lock:
            if prompt.startswith("One failed run"):
                text = self._capture(prompt)
            elif prompt.startswith("Distill rules"):
                text = self._distill(prompt)
            else:
                text = f"{SIM_TAG} no scripted answer matches this prompt"
        content = [{"type": "text", "text": f"{SIM_TAG} scripted answer"}, {"type": "text", "text": text}]
        message = {"id": f"msg_sim_loop_{abs(hash(text)) % 10**12:012d}", "type": "message", "role": "assistant",
                   "model": SIMULATED_MODEL, "content": content, "stop_reason": "end_turn", "stop_sequence": None,
                   "usage": {"input_tokens": estimate_input_tokens(request), "output_tokens": estimate_tokens(content),
                             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
        return Reply(message, "answer", 0)

    def _capture(self, prompt: str) -> str:
        mode = self.mode_of(prompt)
        if mode is None:
            return json.dumps({"task": "unknown", "believed": "the evidence does not say",
                               "actual": "the evidence does not say", "failure_class": "unknown", "cost_minutes": 0})
        believed = mode.believed or "the task was done as asked"
        actual = mode.actual or "a rule in the playbook made the agent skip a step the task needed"
        return json.dumps({"task": _norm(mode.task), "believed": believed, "actual": actual,
                           "failure_class": mode.failure_class, "cost_minutes": 25})

    def _distill(self, prompt: str) -> str:
        by_mode: dict[str, list[str]] = {}
        for _, body in _INCIDENT.findall(prompt):
            data = yaml.safe_load(body)
            mode = self.mode_of(data.get("task", "")) if isinstance(data, dict) else None
            if mode is not None:
                by_mode.setdefault(mode.id, []).append(str(data["id"]))
        proposals = [self._proposal(self.modes[mid], cites) for mid, cites in by_mode.items()]
        return json.dumps({"proposals": proposals})

    def _proposal(self, mode: Mode, cites: list[str]) -> dict:
        k = self.proposed.get(mode.id, 0)
        self.proposed[mode.id] = k + 1
        draw = random.Random(f"loop-distiller:{self.seed}:{mode.id}:{k}").random()
        scenario = mode.id
        if mode.kind == "done-right":  # it failed because of a harmful rule: the fix it sees is the opposite rule
            text, kind = redundant_text(mode, 1)[0], "redundant"
        elif draw < self.config.p_redundant:
            (text, scenario), kind = redundant_text(mode, k), "redundant"
        elif draw < self.config.p_redundant + self.config.p_harmful:
            text, kind = harmful_text(mode.rule), "harmful"
        else:
            text, kind = mode.rule, "harmful" if mode.harmful_rule else "good"
        self.kinds[_norm(text)] = kind
        return {"kind": "rule", "rule": text, "cites": cites, "task_types": [], "scenario": {"existing": scenario}}

    def kind_of(self, rule_text: str) -> str:
        return self.kinds.get(_norm(rule_text), "unknown")
