"""One stop list and one Jaccard for the gate, distill and lessons (bot/_util/similarity.py)."""

from bot._util.similarity import STOP_WORDS, jaccard, similarity, terms, words


def test_terms_keep_compound_tokens_and_drop_sentence_punctuation():
    assert terms("Read CSVs with utf-8-sig, see packages/api.") == {"read", "csvs", "utf-8-sig", "see", "packages/api"}


def test_words_split_at_punctuation_and_stem():
    assert words("packages/api/pytest.ini was running tests") == {"packag", "api", "pytest", "ini", "runn", "test"}


def test_stop_words_are_dropped_by_both_cuts():
    text = "when you should use the thing"
    assert "thing" in terms(text) and "thing" in words(text)
    assert not (terms(text) | words(text)) & STOP_WORDS


def test_jaccard_and_its_empty_case():
    assert jaccard({"a", "b"}, {"b", "c"}) == 1 / 3
    assert jaccard(set(), set()) == 0.0 and jaccard(set(), set(), empty=1.0) == 1.0
    assert similarity("Run pytest from packages/api.", "run pytest in packages/api") == 1.0
