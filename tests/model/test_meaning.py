"""Twins and conflicts between rules (issue 49): held-out pairs of bench/data/rule_pairs.yaml, by word overlap
(always) and by the embedding model (when `replaybook model install embeddings` ran; skipped otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from helpers import REPO

from bot._util.similarity import similarity
from bot.model import meaning
from bot.model.embeddings import install

# The user's cache as it was before the autouse fixture moved HOME: the model is read from there, never fetched.
REAL_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replaybook"
PAIRS = yaml.safe_load((REPO / "bench" / "data" / "rule_pairs.yaml").read_text(encoding="utf-8"))["pairs"]


def held(kind: str, n: int) -> dict:
    """The n-th held-out pair of a kind (bench/meaning.py's split: the 2nd, 4th … of each kind)."""
    return [p for p in PAIRS if p["kind"] == kind][2 * n + 1]


HELD = [held("twin", 0), held("twin", 5), held("near_miss", 0), held("near_miss", 6), held("conflict", 0),
        held("conflict", 4), held("unrelated", 1)]
EXPECTED = {"twin": "twin", "near_miss": "", "conflict": "conflict", "unrelated": ""}


@pytest.fixture(scope="module")
def embeddings():
    try:
        folder = install.locate(root=REAL_CACHE)
        return meaning.Embeddings(folder)
    except ImportError as exc:
        pytest.skip(f"{exc.name} is not installed: pip install 'replaybook[meaning]'")
    except install.ModelNotInstalled:
        pytest.skip("the embedding model is not installed: replaybook model install embeddings")


@pytest.mark.parametrize("pair", HELD, ids=lambda p: f"{p['kind']}: {p['a'][:30]}")
def test_word_overlap_fallback_on_held_pairs(pair):
    found = meaning.relate(pair["a"], pair["b"], meaning.WordOverlap())
    assert found.kind == EXPECTED[pair["kind"]], found
    assert found.method == meaning.WORDS


def test_before_49_word_overlap_took_a_near_miss_for_a_twin_and_missed_a_paraphrase():
    near, twin = held("near_miss", 0), held("twin", 0)
    assert similarity(near["a"], near["b"]) >= 0.6 > similarity(twin["a"], twin["b"])


def test_without_the_model_word_overlap_decides_and_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    meaning.default.cache_clear()
    try:
        assert isinstance(meaning.default(), meaning.WordOverlap)
        assert "replaybook model install embeddings" in meaning.why_words() or "replaybook[meaning]" in meaning.why_words()
    finally:
        meaning.default.cache_clear()


def test_a_conflict_is_not_a_twin_however_close_the_words():
    a, b = "Always run `npm ci` before the tests.", "Never run `npm ci` before the tests."
    assert meaning.polarity(a) == 1 and meaning.polarity(b) == -1
    assert meaning.relate(a, b, meaning.WordOverlap()).kind == "conflict"
    assert meaning.relate(a, a, meaning.WordOverlap()).kind == "twin"


def test_a_flag_named_no_is_not_a_negation():
    assert meaning.polarity("Run `pip install --no-cache-dir` in the image.") == 1


# -- the embedding model (skipped without it) ---------------------------------------------------------


def test_the_numpy_bert_matches_sentence_transformers_reference_values(embeddings):
    model = embeddings.model
    assert model.ids("This is an example sentence") == [101, 2023, 2003, 2019, 2742, 6251, 102]
    vector = embeddings.vector("This is an example sentence")
    # The model card's / sentence-transformers docs' first values for this sentence, and its docs' similarity.
    assert [round(float(x), 4) for x in vector[:5]] == [0.0677, 0.0635, 0.0487, 0.0793, 0.0374]
    assert abs(float((vector ** 2).sum()) - 1.0) < 1e-5
    assert embeddings.similarity("A man is eating food.", "A man is eating a piece of bread.") == \
        pytest.approx(0.7553, abs=1e-3)


def test_identical_is_one_and_a_paraphrase_beats_an_unrelated_rule(embeddings):
    twin, other = held("twin", 0), held("unrelated", 0)
    assert embeddings.similarity(twin["a"], twin["a"]) == pytest.approx(1.0, abs=1e-5)
    assert embeddings.similarity(twin["a"], twin["b"]) > 0.8 > 0.3 > embeddings.similarity(other["a"], other["b"])


@pytest.mark.parametrize("pair", HELD, ids=lambda p: f"{p['kind']}: {p['a'][:30]}")
def test_embeddings_on_held_pairs(embeddings, pair):
    found = meaning.relate(pair["a"], pair["b"], embeddings)
    assert found.kind == EXPECTED[pair["kind"]], found
    assert found.method == meaning.EMBEDDINGS and (not found.kind or "by embeddings" in found.reason)
