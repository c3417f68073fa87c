"""Word-overlap similarity: one stop list, two ways to cut text into words, one Jaccard.

Used by the gate (a candidate rule that repeats an admitted one is a twin), distill (incidents
whose belief deltas share words are packed together; a proposal that repeats a rule is refused)
and lessons (a lesson that repeats another is a duplicate).

- ``terms``: tokens that keep their inner ``. _ / + : = -`` so ``utf-8-sig``,
  ``packages/api`` and ``--no-cache`` stay whole (rules and lessons name tools and paths);
  leading and trailing punctuation is cut, so a sentence's last word matches the same word
  mid-sentence.
- ``words``: split at anything not a letter or digit (``packages/api/pytest.ini`` gives
  ``packages api pytest ini``), and a plural or -ed/-ing ending cut. Distill's grouping,
  where one mistake is told in different words.

Both drop ``STOP_WORDS`` and words under three letters. Word overlap is not meaning: it is
cheap, deterministic and explainable, and each caller says what its threshold is for.
"""

from __future__ import annotations

import re

# English function words and the imperative fillers rules and lessons are written with.
# One list for every caller (gate, distill and lessons each had their own until #16; this is
# their union: a word one of them ignored is ignored by all).
STOP_WORDS = frozenset(
    "a an and the to of in on for with from by or is are be it its this that then any every when before after if "
    "do not you your was were has had have would should could will there their them they what which who how into "
    "out at as so than but each own must all can while use using".split())

_TERM = re.compile(r"[a-z0-9][a-z0-9._/+:=-]*[a-z0-9]|[a-z0-9]")
_WORD = re.compile(r"[a-z0-9]+")


def terms(text: str) -> set[str]:
    """Content terms of ``text``, compound tokens kept whole (see the module docstring)."""
    found = (t.strip("._-") for t in _TERM.findall(text.lower()))
    return {t for t in found if len(t) >= 3 and t not in STOP_WORDS}


def words(text: str) -> set[str]:
    """Content words of ``text``, split at punctuation and stemmed (see the module docstring)."""
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) > 2}


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def jaccard(a: set[str], b: set[str], *, empty: float = 0.0) -> float:
    """|a ∩ b| / |a ∪ b|; ``empty`` when both are empty."""
    union = a | b
    return len(a & b) / len(union) if union else empty


def similarity(a: str, b: str) -> float:
    """Jaccard overlap of two texts' content terms (rules: the gate's twin check, distill's)."""
    return jaccard(terms(a), terms(b))
