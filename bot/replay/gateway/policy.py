"""The SIMULATED model: scripted answers for offline, deterministic replays.

A scenario's ``policy.yaml`` says what the simulated model does when the
playbook rule under test is in the system prompt (``with_rule``) and when it
is not (``without_rule``)::

    branch_on: "package-local test config"   # searched case-insensitively
    with_rule:
      - bash: "cd packages/api && python -m pytest -q"
      - write: {path: packages/api/src/api/limits.py, content: "LIMIT = 10\\n"}
      - read: packages/api/pytest.ini                  # the agent's Read/read tool, else `cat`
      - say: "Fixed it. [rule-0001]"
    without_rule:
      - bash: "python -m pytest -q"
      - bash: "curl -s \\"$FLAKY_URL\\""
        repeat: 3
      - say: "Done."

The model keeps no state between HTTP requests: the next step is the one at
index "number of ``tool_result`` blocks in the request" (repeats expanded).
Past the last step it says "done".

Two optional keys make the agent noisy, as real agents are (SIMULATED, per
scenario): ``mistake: p`` is the chance that it takes ``without_rule`` when
the rule is not in its prompt (default 1: always), and ``effect: e`` how much
the rule helps: with it, it still takes ``without_rule`` with chance
p * (1 - e) (default 1: never). Drawn once per run from the run's seed, like
the noise. A third, ``overridden_by: "text"``, models a contradicting
instruction (SIMULATED): when that text is in the prompt too, the agent obeys
it and the rule counts as absent, as when a repository's rule contradicts one
of the organisation's.

Token counts are estimates, the same for every run of the same conversation:
input = len(canonical JSON of system, messages and tools) // 4, output =
len(canonical JSON of the answer's content) // 4, each at least 1.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import random
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from bot._util import yamlfile
from bot._util.text_safety import shown
from bot.errors import BadInput
from bot.replay.delivery import loaded_rules

log = logging.getLogger(__name__)

Branch = Literal["with_rule", "without_rule"]
SIMULATED_MODEL = "simulated"
SIM_TAG = "[SIMULATED]"
_ACTIONS = ("bash", "write", "read", "say")
_TOP_KEYS = ("branch_on", "with_rule", "without_rule", "mistake", "effect", "overridden_by")
_MAX_REPEAT = 100_000
_CWD_LINE = re.compile(r"^[ \t>*-]*(?:primary )?working directory:[ \t]*(/[^\n]*)$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Step:
    """One scripted action: ``bash`` a command, ``write`` a file, ``read`` one, or ``say`` text and stop."""

    action: Literal["bash", "write", "read", "say"]
    command: str = ""
    path: str = ""
    content: str = ""
    text: str = ""
    repeat: int = 1


@dataclass(frozen=True)
class Reply:
    """The simulated model's answer: a Messages API response body, and why."""

    message: dict[str, Any]
    branch: Branch
    step_index: int


@dataclass(frozen=True)
class Policy:
    """Scripted steps for both branches, plus seeded noise that flips the branch.

    ``noise`` is the probability that this run takes the *other* branch. It is
    drawn once, when the policy is built, from ``seed`` alone: the same seed
    always flips or never does, and over many seeds the flip rate is ``noise``.

    ``follow`` is the probability that the agent follows a rule that *is* in
    its prompt (an agent reading a long playbook ignores some of it); drawn
    once from ``seed`` like the noise, independently of it. 1.0 (the
    default) always follows.
    """

    branch_on: str
    with_rule: tuple[Step, ...]
    without_rule: tuple[Step, ...]
    noise: float = 0.0
    seed: int = 0
    source: str = "<policy>"
    warnings: tuple[str, ...] = ()
    follow: float = 1.0
    mistake: float = 1.0  # SIMULATED: P(the mistake) without the rule
    effect: float = 1.0  # SIMULATED: with the rule, P(the mistake) = mistake * (1 - effect)
    overridden_by: str = ""  # SIMULATED: text that, in the prompt too, contradicts the rule and wins
    flipped: bool = field(init=False)
    ignored: bool = field(init=False)
    slip: float = field(init=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.noise <= 1.0:
            raise BadInput(f"{self.source}: noise is {self.noise}; give a probability between 0 and 1")
        object.__setattr__(self, "with_rule", tuple(self.with_rule))
        object.__setattr__(self, "without_rule", tuple(self.without_rule))
        if not 0.0 <= self.follow <= 1.0:
            raise BadInput(f"{self.source}: follow is {self.follow}; give a probability between 0 and 1")
        for name in ("mistake", "effect"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise BadInput(f"{self.source}: {name} is {value}; give a probability between 0 and 1")
        object.__setattr__(self, "slip", random.Random(f"replaybook-policy-mistake:{self.seed}").random())
        object.__setattr__(self, "flipped", _draw_flip(self.noise, self.seed))
        object.__setattr__(self, "ignored", _draw_ignore(self.follow, self.seed))

    def seeded(self, *, noise: float, seed: int) -> Policy:
        """The same script with another noise level and seed (one per replay run)."""
        return replace(self, noise=noise, seed=seed)

    def branch_for(self, request: dict[str, Any]) -> Branch:
        """The branch this run takes for ``request``, noise included."""
        prompt = system_text(request).casefold()
        has_rule = (self.branch_on.casefold() in prompt and not self.ignored
                    and not (self.overridden_by and self.overridden_by.casefold() in prompt))
        right = self.slip >= (self.mistake * (1 - self.effect) if has_rule else self.mistake)
        if self.flipped:
            right = not right
        return "with_rule" if right else "without_rule"

    def step_at(self, branch: Branch, index: int) -> Step | None:
        """The step at ``index`` with repeats expanded, or None past the end."""
        for step in self.with_rule if branch == "with_rule" else self.without_rule:
            if index < step.repeat:
                return step
            index -= step.repeat
        return None

    def respond(self, request: dict[str, Any]) -> Reply:
        """Answer one Messages API request body."""
        branch = self.branch_for(request)
        index = count_tool_results(request)
        step = self.step_at(branch, index) or Step("say", text="done")
        content, stop_reason = _render(step, index, request)
        message = {
            "id": _message_id(request, branch, index),
            "type": "message",
            "role": "assistant",
            "model": SIMULATED_MODEL,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": estimate_input_tokens(request),
                "output_tokens": estimate_tokens(content),
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        return Reply(message, branch, index)


# --- reading the request -------------------------------------------------


def _block_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return []


def system_text(request: dict[str, Any]) -> str:
    """All system prompt text: ``system`` and ``role: system`` messages (Claude Code sends both), and Claude Code's
    ``<system-reminder>`` user blocks, which carry the CLAUDE.md and rule files it loaded (a path-scoped rule file
    arrives at the end of a tool's result: ``bot.replay.delivery.loaded_rules``)."""
    parts = _block_texts(request.get("system"))
    for msg in request.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "system":
            parts += _block_texts(msg.get("content"))
        elif isinstance(msg, dict) and msg.get("role") == "user":
            parts += [t for t in _block_texts(msg.get("content")) if t.lstrip().startswith("<system-reminder>")]
            for block in msg.get("content") if isinstance(msg.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":  # a scoped rule Claude Code loaded
                    parts += loaded_rules(block.get("content"))
    return "\n".join(parts)


def count_tool_results(request: dict[str, Any]) -> int:
    count = 0
    for msg in request.get("messages") or []:
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result")
    return count


def working_directory(request: dict[str, Any]) -> str | None:
    """The agent's cwd, as Claude Code writes it in its system prompt.

    Older versions write "Working directory: /path", 2.x " - Primary working directory: /path".
    """
    match = _CWD_LINE.search(system_text(request))
    return match.group(1).strip() if match else None


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(obj: Any) -> int:
    """A deterministic token estimate: canonical JSON length // 4, at least 1."""
    return max(1, len(_canonical(obj)) // 4)


def estimate_input_tokens(request: dict[str, Any]) -> int:
    return estimate_tokens([request.get("system"), request.get("messages"), request.get("tools")])


# --- building the answer -------------------------------------------------


def _render(step: Step, index: int, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Content blocks and stop_reason for one step, using the tools the agent offers."""
    if step.action == "say":
        said = [_text(f"{SIM_TAG} {step.text}")]
        submit = _bash_call(f"echo {SUBMIT_COMMAND}", _tools(request)) if _asks_for_submit(request) else None
        if submit:  # the agent ends a task by a command, and a model following its instructions sends it
            return said + [{"type": "tool_use", "id": f"toolu_sim_{index:05d}", "name": submit[0],
                            "input": submit[1]}], "tool_use"
        return said, "end_turn"
    call = _tool_call(step, request)
    if call is None:
        what = f"run `{step.command}`" if step.action == "bash" else f"{step.action} {step.path}"
        return [_text(f"{SIM_TAG} No usable tool was offered; the script would {what}.")], "end_turn"
    name, tool_input = call
    note = _text(f"{SIM_TAG} step {index + 1}: {step.action}")
    use = {"type": "tool_use", "id": f"toolu_sim_{index:05d}", "name": name, "input": tool_input}
    return [note, use], "tool_use"


# mini-swe-agent finishes only when the model runs `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.
SUBMIT_COMMAND = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _asks_for_submit(request: dict[str, Any]) -> bool:
    for msg in request.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "user":
            return any(f"echo {SUBMIT_COMMAND}" in t for t in _block_texts(msg.get("content")))
    return False


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in request.get("tools") or [] if isinstance(t, dict) and "name" in t}


def _tool_call(step: Step, request: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    tools = _tools(request)
    if step.action == "write":
        call = _write_call(step, request, tools)
        if call:
            return call
        command = _heredoc(step.path, step.content)
    elif step.action == "read":  # the agent's file tool (a path-scoped rule's trigger), else `cat`
        if "Read" in tools:
            return "Read", {"file_path": _absolute(step.path, working_directory(request))}
        if "read" in tools:
            key = "filePath" if "filePath" in ((tools["read"].get("input_schema") or {}).get("properties") or {}) else "path"
            return "read", {key: _absolute(step.path, working_directory(request)) if key == "filePath" else step.path}
        command = "cat -- " + shlex.quote(step.path)
    else:
        command = step.command
    return _bash_call(command, tools)


def _bash_call(command: str, tools: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    for name in ("Bash", "bash"):
        if name in tools:
            tool_input: dict[str, Any] = {"command": command}
            props = (tools[name].get("input_schema") or {}).get("properties") or {}
            if "description" in props:
                tool_input["description"] = "SIMULATED model step"
            return name, tool_input
    return None


def _write_call(
    step: Step, request: dict[str, Any], tools: dict[str, dict[str, Any]]
) -> tuple[str, dict[str, Any]] | None:
    if "Write" in tools:
        return "Write", {"file_path": _absolute(step.path, working_directory(request)), "content": step.content}
    if "write" in tools:
        if "filePath" in ((tools["write"].get("input_schema") or {}).get("properties") or {}):  # opencode's
            return "write", {"filePath": _absolute(step.path, working_directory(request)), "content": step.content}
        return "write", {"path": step.path, "content": step.content}
    if "str_replace_based_edit_tool" in tools:
        return "str_replace_based_edit_tool", {"command": "create", "path": step.path, "file_text": step.content}
    return None


def _absolute(path: str, cwd: str | None) -> str:
    if path.startswith("/") or not cwd:
        return path
    return f"{cwd.rstrip('/')}/{path}"


def _heredoc(path: str, content: str) -> str:
    """A shell command that writes ``content`` to ``path`` byte for byte.

    printf rather than a heredoc, which would add or eat a final newline.
    """
    quoted = shlex.quote(path)
    return f"mkdir -p -- \"$(dirname -- {quoted})\" && printf '%s' {shlex.quote(content)} > {quoted}"


def _message_id(request: dict[str, Any], branch: str, index: int) -> str:
    digest = hashlib.sha256(_canonical([branch, index, request.get("messages")]).encode()).hexdigest()
    return f"msg_sim_{digest[:20]}"


def _draw_flip(noise: float, seed: int) -> bool:
    # A string seed is hashed with SHA-512, so the draw is the same in every
    # process and is not correlated with other Random(seed) users in a run.
    return random.Random(f"replaybook-policy-noise:{seed}").random() < noise


def _draw_ignore(follow: float, seed: int) -> bool:
    return follow < 1.0 and random.Random(f"replaybook-policy-follow:{seed}").random() >= follow


# --- loading policy.yaml --------------------------------------------------


def load_policy(path: str | Path, *, noise: float = 0.0, seed: int = 0, follow: float = 1.0) -> Policy:
    """Read and validate a ``policy.yaml``; problems raise ``BadInput`` naming the file and field.

    It is read like every file a user or a PR supplies (bot._util.yamlfile): size-capped, no anchors or
    aliases, so a small file can never stand for a huge structure."""
    path = Path(path)
    data = copy.deepcopy(_yaml(str(path), yamlfile.read_text(path, what="policy file")))
    return parse_policy(data, source=str(path), noise=noise, seed=seed, follow=follow)


@functools.lru_cache(maxsize=64)
def _yaml(source: str, text: str) -> Any:
    """Parsed once per text: a gate loads the same policy for every trial (a few ms of YAML each time)."""
    return yamlfile.parse(Path(source), text, what="policy file").data


def parse_policy(data: Any, *, source: str = "<policy>", noise: float = 0.0, seed: int = 0,
                 follow: float = 1.0) -> Policy:
    """Validate already-loaded YAML data (a mapping) into a ``Policy``."""
    if not isinstance(data, dict):
        raise BadInput(f"{source}: a policy is a mapping with keys {', '.join(_TOP_KEYS)}; got {type(data).__name__}")
    problems: list[str] = []
    warnings = [f"`{k}`: unknown key, ignored (known: {', '.join(_TOP_KEYS)})" for k in data if k not in _TOP_KEYS]
    branch_on = data.get("branch_on")
    if not isinstance(branch_on, str) or not branch_on.strip():
        problems.append("`branch_on`: give the text (a string) whose presence in the system prompt means the rule is in it")
    branches = {name: _parse_steps(data.get(name), name, problems, warnings) for name in ("with_rule", "without_rule")}
    rates = {name: data.get(name, 1.0) for name in ("mistake", "effect")}
    for name, value in rates.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            problems.append(f"`{name}`: give a probability between 0 and 1; got {shown(value)}")
    overridden_by = data.get("overridden_by", "")
    if not isinstance(overridden_by, str):
        problems.append(f"`overridden_by`: give the text (a string) of the contradicting instruction; got {shown(overridden_by)}")
    if problems:  # an unknown key often explains a missing one (`contnet:` for `content:`), so say both
        raise BadInput(f"{source}: invalid policy", problems=problems + warnings)
    for warning in warnings:
        log.warning("%s: %s", source, warning)
    return Policy(
        branch_on=branch_on.strip(),
        with_rule=branches["with_rule"],
        without_rule=branches["without_rule"],
        noise=noise,
        seed=seed,
        source=source,
        warnings=tuple(warnings),
        follow=follow,
        mistake=float(rates["mistake"]),
        effect=float(rates["effect"]),
        overridden_by=overridden_by.strip() if isinstance(overridden_by, str) else "",
    )


def _parse_steps(raw: Any, name: str, problems: list[str], warnings: list[str]) -> tuple[Step, ...]:
    if not isinstance(raw, list):
        problems.append(f"`{name}`: give a list of steps (each one of {', '.join(_ACTIONS)}); got {type(raw).__name__}")
        return ()
    steps = []
    for i, item in enumerate(raw):
        step = _parse_step(item, f"{name}[{i}]", problems, warnings)
        if step is not None:
            steps.append(step)
    said = [i for i, s in enumerate(steps) if s.action == "say"]
    if said and said[0] < len(steps) - 1:
        warnings.append(f"`{name}[{said[0] + 1}:]`: never reached; a `say` ends the agent's turn")
    return tuple(steps)


def _parse_step(item: Any, where: str, problems: list[str], warnings: list[str]) -> Step | None:
    if not isinstance(item, dict):
        problems.append(f"`{where}`: a step is a mapping such as {{bash: CMD}}; got {shown(item)}")
        return None
    actions = [k for k in _ACTIONS if k in item]
    if len(actions) != 1:
        problems.append(f"`{where}`: give exactly one of {', '.join(_ACTIONS)}; got keys {sorted(map(str, item))}")
        return None
    action = actions[0]
    unknown = [k for k in item if k not in (action, "repeat")]
    if unknown:
        warnings.append(f"`{where}`: unknown keys {sorted(map(str, unknown))}, ignored")
    repeat = item.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not 1 <= repeat <= _MAX_REPEAT:
        problems.append(f"`{where}.repeat`: give a whole number from 1 to {_MAX_REPEAT}; got {shown(repeat)}")
        return None
    value = item[action]
    if action == "write":
        return _parse_write(value, where, repeat, problems, warnings)
    if not isinstance(value, str) or not value:
        problems.append(f"`{where}.{action}`: give a non-empty string; got {shown(value)}")
        return None
    if action == "bash":
        return Step("bash", command=value, repeat=repeat)
    if action == "read":
        return Step("read", path=value, repeat=repeat)
    return Step("say", text=value, repeat=repeat)


def _parse_write(value: Any, where: str, repeat: int, problems: list[str], warnings: list[str]) -> Step | None:
    if not isinstance(value, dict):
        problems.append(f"`{where}.write`: give {{path: FILE, content: TEXT}}; got {shown(value)}")
        return None
    unknown = sorted(map(str, (k for k in value if k not in ("path", "content"))))
    if unknown:
        warnings.append(f"`{where}.write`: unknown keys {unknown}, ignored (known: path, content)")
    path, content = value.get("path"), value.get("content")
    if not isinstance(path, str) or not path:
        problems.append(f"`{where}.write.path`: give the file path (relative to the agent's working directory)")
        return None
    if not isinstance(content, str):
        problems.append(f"`{where}.write.content`: give the file's text as a string; got {shown(content)}")
        return None
    return Step("write", path=path, content=content, repeat=repeat)
