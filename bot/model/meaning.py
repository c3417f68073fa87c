"""Twins and conflicts between rules, by meaning when the embedding model is installed, by word overlap when not.

- **Twin**: a proposal that restates an admitted rule. Similar enough (cosine of the two sentences' embeddings, or
  the Jaccard overlap of their content terms) and neither opposite in polarity nor naming other specifics (a path,
  a command, a flag, a file, a number one names and the other does not).
- **Conflict**: two rules that demand opposite things in the same situation. Cosine alone cannot see it: "always
  run X" and "never run X" are neighbours in embedding space. So each rule is *neutralised* (negation cues dropped,
  a negative verb mapped to its positive: disable -> enable, remove -> add, exclude -> include …); the two
  neutral texts must be similar enough, and the polarities must differ (one negates, the other does not), or the
  two swap what they prefer ("X instead of Y" against "Y instead of X").

Thresholds per method were chosen on half of ``bench/data/rule_pairs.yaml`` and reported on the other half
(``bench/meaning.py``, ``bench/README.md``). :func:`default` says which method decides: the embedding model when
``replaybook model install embeddings`` ran and numpy, safetensors and tokenizers import; word overlap otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Protocol

from bot._util.similarity import similarity as word_overlap
from bot._util.similarity import terms, words

EMBEDDINGS = "embeddings (all-MiniLM-L6-v2)"
WORDS = "word overlap"

# method -> (twin threshold, conflict threshold); see bench/README.md for how they were chosen.
THRESHOLDS = {EMBEDDINGS: (0.85, 0.75), WORDS: (0.30, 0.30)}  # words: 0.30, not the tuned 0.15 (see bench/README.md)


class Measure(Protocol):
    method: str

    def similarity(self, a: str, b: str) -> float: ...


class WordOverlap:
    """Jaccard overlap of content terms (``bot._util.similarity``): the fallback, and the method before #49."""

    method = WORDS

    def similarity(self, a: str, b: str) -> float:
        return word_overlap(a, b)


class Embeddings:
    """Cosine of all-MiniLM-L6-v2 sentence vectors (unit length, so a dot product); vectors kept per text."""

    method = EMBEDDINGS

    def __init__(self, folder):
        from bot.model.embeddings.minilm import MiniLM

        self.model = MiniLM(folder)
        self._vectors: dict[str, object] = {}

    def vector(self, text: str):
        if text not in self._vectors:
            self._vectors[text] = self.model.encode([text])[0]
        return self._vectors[text]

    def similarity(self, a: str, b: str) -> float:
        return float(self.vector(a) @ self.vector(b))


@dataclass(frozen=True)
class Relation:
    """What links two rules: ``twin``, ``conflict`` or nothing, the score, the method that decided, and why."""

    kind: str  # "twin" | "conflict" | ""
    score: float
    method: str
    reason: str = ""


@lru_cache(maxsize=1)
def default() -> Measure:
    """The embedding model when installed and importable, else word overlap (:func:`why_words` says why)."""
    try:
        from bot.model.embeddings import install

        return Embeddings(install.locate())
    except Exception:  # noqa: BLE001 - any missing piece (package, file, marker) means the fallback
        return WordOverlap()


def why_words() -> str:
    """Why the embedding model is not used, or "" when it is."""
    try:
        import numpy  # noqa: F401
        import safetensors  # noqa: F401
        import tokenizers  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed: pip install 'replaybook[meaning]'"
    from bot.model.embeddings import install
    from bot.errors import BadInput

    try:
        install.locate()
    except BadInput as exc:
        return exc.message
    return ""


# -- polarity ---------------------------------------------------------------------------------------

_NEGATION = {"never", "not", "no", "don't", "dont", "avoid", "stop", "nor", "shouldn't", "mustn't", "cannot",
             "can't", "refrain"}
_ANTONYMS = {"disable": "enable", "remove": "add", "exclude": "include", "delete": "keep", "false": "true",
             "off": "on", "forbid": "allow", "deny": "allow", "disallow": "allow", "unpin": "pin",
             "uninstall": "install", "omit": "include"}
_FILLER = {"always", "must", "should", "do", "does", "never", "not", "no", "don't", "dont", "avoid", "stop"}
# What follows these explains the rule; a negation there ("so vitest does not wait") is not the rule's.
_EXPLAINS = re.compile(r"\b(?:so|because|since|which|otherwise|as)\b.*$", re.I)
_CLAUSES = re.compile(r"[;:]|(?<=[a-z0-9`)])\.(?:\s|$)|,\s*(?=not\b)|\b(?=instead\s+of\b|rather\s+than\b|out\s+of\b|over\b)",
                      re.I)
_NEGATIVE_LEAD = re.compile(r"^\s*(?:instead\s+of|rather\s+than|out\s+of|over|not)\b", re.I)
_LEAD_CONDITION = re.compile(r"^\s*(?:when|whenever|before|after|if|once|while|on|for)\b[^,]*,", re.I)


def directives(text: str) -> list[tuple[int, str]]:
    """The rule cut into what it says to do (+1) and not to do (-1), each with its neutral wording: "use X
    instead of Y" is (+1, "use X"), (-1, "Y"); "do not commit .env" is (-1, "commit .env")."""
    out: list[tuple[int, str]] = []
    verb = ""
    for clause in _CLAUSES.split(text):
        clause = _EXPLAINS.sub("", clause).strip(" ,.")
        if not clause:
            continue
        words = _words(_LEAD_CONDITION.sub("", clause))
        lead = _NEGATIVE_LEAD.match(clause) is not None
        flips = lead or any(w in _NEGATION for w in words[:3])
        flips ^= any(w in _ANTONYMS for w in words)
        said = neutral(clause)
        if lead and verb:  # "use X instead of Y": the second directive is "use Y", not a bare "Y"
            said = f"{verb} {said}"
        elif words:
            verb = words[0] if not flips else verb
        out.append((-1 if flips else 1, said))
    return out


def polarity(text: str) -> int:
    """-1 when the rule's first directive says not to do something, +1 otherwise."""
    found = directives(text)
    return found[0][0] if found else 1


def neutral(text: str) -> str:
    """``text`` with its negations dropped and negative verbs made positive: what it is about, not which way."""
    out = []
    for token in _WORD.findall(_NEGATIVE_LEAD.sub("", text)):
        w = token.lower()
        if w in _FILLER:
            continue
        out.append(_ANTONYMS.get(w, token))
    return " ".join(out)


_WORD = re.compile(r"[A-Za-z']+|[^\sA-Za-z']+")
_TOKEN = re.compile(r"[a-z0-9][a-z0-9._/+:=-]*[a-z0-9]|[a-z0-9]")


def _words(text: str) -> list[str]:
    # Flags and paths (`--no-cache`, `no-verify`) are names, not negations: only whole words count.
    return [t.lower() for t in re.split(r"[\s,;:.!?()\"]+", text) if re.fullmatch(r"[A-Za-z']+", t)]


def _specifics(text: str) -> set[str]:
    """Names a rule pins down: paths, commands with flags, files, numbers, anything in backticks."""
    found = {t for t in terms(text) if re.search(r"[./_=:@0-9-]", t)}
    return found | {t.lower() for t in re.findall(r"`([^`]+)`", text)}


# -- the two relations ------------------------------------------------------------------------------


def relate(a: str, b: str, measure: Measure | None = None,
           thresholds: tuple[float, float] | None = None) -> Relation:
    """Twin, conflict or neither (conflict is asked first: a contradiction is also very similar).

    Conflict: a directive of one and a directive of the other with opposite signs say the same thing once
    neutralised (the best such pair scores), and the two rules as a whole, neutralised, are as similar too.
    Twin: similar, no opposite directives that score, and no specifics that only one of them names.
    ``thresholds``: (twin, conflict); default the method's :data:`THRESHOLDS` (the bench sweeps them)."""
    measure = measure or default()
    twin_t, conflict_t = thresholds or THRESHOLDS[measure.method]
    da, db = directives(a), directives(b)
    opposed = [min(measure.similarity(x, y), measure.similarity(neutral(a), neutral(b)))
               for sx, x in da for sy, y in db if sx != sy and x and y]
    clash = max(opposed, default=0.0)
    if clash >= conflict_t:
        return Relation("conflict", clash, measure.method,
                        f"one says to do what the other says not to ({_score(clash, measure)})")
    score = measure.similarity(a, b)
    if score >= twin_t and not _other_specifics(a, b) and not _substitution(a, b):
        return Relation("twin", score, measure.method, f"restates it ({_score(score, measure)})")
    return Relation("", score, measure.method)


def _substitution(a: str, b: str) -> bool:
    """The two differ by one span swapped for another of as many words, wherever it occurs (committing -> pushing,
    "apple banana" -> "violin cello" twice): the same shape with another condition or object, a near miss. A
    paraphrase changes more, or changes the length ("again" -> "once more")."""
    wa, wb = words(a), words(b)
    if len(wa - wb) == 1 and len(wb - wa) == 1:
        return True
    ta, tb = _TOKEN.findall(a.lower()), _TOKEN.findall(b.lower())
    ops = [op for op in SequenceMatcher(None, ta, tb, autojunk=False).get_opcodes() if op[0] != "equal"]
    swaps = {(tuple(ta[i1:i2]), tuple(tb[j1:j2])) for tag, i1, i2, j1, j2 in ops if tag == "replace"}
    return bool(ops) and len(swaps) == 1 and all(tag == "replace" and i2 - i1 == j2 - j1 <= 3
                                                 for tag, i1, i2, j1, j2 in ops)


def _other_specifics(a: str, b: str) -> bool:
    """Each names something the other does not (``packages/api`` against ``packages/web``); one that only adds a
    detail (``pytest.ini`` against ``packages/api/pytest.ini``) is the same rule said more fully."""
    sa, sb = _specifics(a), _specifics(b)

    def lone(mine: set[str], theirs: set[str]) -> set[str]:
        return {t for t in mine if not any(t in o or o in t for o in theirs)}

    return bool(lone(sa, sb)) and bool(lone(sb, sa))


def _score(score: float, measure: Measure) -> str:
    if measure.method == WORDS:
        return f"{score:.0%} of content words shared, by word overlap"
    return f"cosine {score:.2f}, by {measure.method}"
