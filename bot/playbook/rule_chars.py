"""The characters a rule may hold: an allow-list, so a reviewer reads exactly what agents will obey.

A rule's text is normalised (NFKC: full-width and other compatibility forms become the letters they
stand for) and then every character must be one a reviewer can see and would not misread:

- no control, format, private-use, surrogate or unassigned character (bidi marks and isolates, the
  Arabic letter mark, zero-width characters, tags), no line or paragraph separator, no space but
  the ASCII one; no variation selector, combining grapheme joiner or blank letter (Hangul fillers,
  the blank braille pattern);
- no combining mark on an ASCII letter (``g`` + U+0338 draws a slash through the ``g``);
- no word that mixes scripts (Latin with Cyrillic, Greek, ...; Han, kana and Hangul mix freely,
  and part words, as they are written without spaces);
- in a Latin word, no letter that is neither ASCII, an ASCII letter with an accent (é, ü), nor a
  letter of a language's alphabet (ß, æ, ø, ł, ...): ``ɡ`` (script g) is refused, ``é`` is kept;
- in a word that looks like a path, a command or an option (it holds ``/ \\ . _ = $ ~ : @`` between
  characters, starts with ``-`` or ``.``, or sits in a code span), nothing but ASCII;
- in a rule written in Latin letters, no word written wholly in letters of another script that look
  like Latin ones (Cyrillic ``ѕһ`` reads as ``sh``).

:func:`problems` names each character by code point and Unicode name, the word it is in (escaped)
and the fix. :mod:`bot.playbook.rule_text` applies it, with its own list of what a rule may never
say, wherever a rule is parsed: so it holds for rule files, distill's answers, the gate's cheap
checks and rendering alike.
"""

from __future__ import annotations

import re
import unicodedata

_INVISIBLE_LETTERS = {0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800, 0x034F, 0x17B4, 0x17B5}
_SELECTORS = (range(0xFE00, 0xFE10), range(0xE0100, 0xE01F0), range(0x180B, 0x1810))
_REFUSED_CATEGORIES = {"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"}
# Latin letters of real alphabets that have no ASCII base letter: kept in prose words.
_ALPHABET_LETTERS = set("ßẞæÆøØœŒłŁđĐðÐþÞħĦŋŊıĸſ")
# Letters of other scripts drawn like Latin ones (lowercase like lowercase, capitals like capitals).
_LATIN_LOOKALIKES = set(
    "аеорсухѕіјһԁԛԝӏүАВЕКМНОРСТХЅІЈҮԌԚԜ"  # Cyrillic
    "αοριντυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ"  # Greek
    "օսցոհ"  # Armenian
    "ᎪᏴᏟᎬᎻᎫᏦᏞᎷᏢᏚᎢᏙᏔᏃ"  # Cherokee
)
_CJK = {"CJK", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO", "IDEOGRAPHIC", "KATAKANA-HIRAGANA"}
_CODE_INSIDE = re.compile(r"\S[/\\._=$~:@]\S")
_TRIM = "\"'`()[]{}<>,;:!?«»“”‘’"


def normalise(text: str) -> str:
    """The form a rule is checked and stored in: NFKC, whitespace collapsed to single spaces."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def describe(ch: str) -> str:
    """``U+0261 LATIN SMALL LETTER SCRIPT G``: how a message names a character."""
    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'an unassigned code point')}"


def _shown(word: str) -> str:
    return "".join(ch if ch.isascii() and ch.isprintable() else f"\\u{ord(ch):04x}" if ord(ch) < 0x10000
                   else f"\\U{ord(ch):08x}" for ch in word[:60])


def _script(ch: str) -> str | None:
    """The script of a letter or digit, from its Unicode name (``CYRILLIC SMALL LETTER O``: CYRILLIC)."""
    if not (unicodedata.category(ch)[0] == "L" or unicodedata.category(ch) == "Nd"):
        return None
    if ch.isascii():
        return "LATIN"
    first = unicodedata.name(ch, "UNKNOWN").split()[0]
    return "CJK" if first in _CJK else first


def _invisible(ch: str) -> bool:
    code = ord(ch)
    return (unicodedata.category(ch) in _REFUSED_CATEGORIES or code in _INVISIBLE_LETTERS
            or any(code in r for r in _SELECTORS))


def _odd_latin(ch: str) -> bool:
    """A Latin letter a reviewer would misread: not ASCII, no accent on an ASCII letter, no alphabet's own."""
    if ch.isascii() or ch in _ALPHABET_LETTERS or _script(ch) != "LATIN":
        return False
    base = unicodedata.normalize("NFD", ch)[0]
    return not base.isascii()


def problems(raw: str) -> list[str]:
    """Why ``raw`` (a rule's text as written) holds a character a reviewer cannot see or would misread."""
    out: list[str] = []
    # Whitespace of any kind is folded to one space; every other character is checked as written and as stored.
    for ch in dict.fromkeys(ch for ch in raw + normalise(raw) if not ch.isspace() and _invisible(ch)):
        out.append(f"holds {describe(ch)}, which a reviewer cannot see or which changes how the text reads: "
                   "remove it")
    text = normalise(raw)
    spans = [(m.start(), m.end()) for m in re.finditer(r"`[^`]+`", text)]
    latin = sum(_script(ch) == "LATIN" for ch in text)
    other = sum(_script(ch) not in (None, "LATIN") for ch in text)
    # Han, kana and Hangul cannot pass for Latin letters, and are written without spaces: they part words.
    parted = "".join(" " if _script(ch) == "CJK" or unicodedata.name(ch, "").startswith("IDEOGRAPHIC") else ch
                     for ch in text)
    position = 0
    for word in parted.split(" "):
        start, position = position, position + len(word) + 1
        problem = _word_problem(word, in_code=any(a <= start < b for a, b in spans), latin_text=latin > other)
        if problem:
            out.append(problem)
    return list(dict.fromkeys(out))


def _word_problem(word: str, *, in_code: bool, latin_text: bool) -> str | None:
    bare = word.strip(_TRIM)
    for i, ch in enumerate(bare):
        if unicodedata.category(ch) in ("Mn", "Me") and i and bare[i - 1].isascii() and bare[i - 1].isalpha():
            return (f"holds {describe(ch)} on the letter {bare[i - 1]!r} in {_shown(bare)!r}, which draws over it: "
                    "write the plain letter")
    scripts = {s for s in map(_script, bare) if s}
    if len(scripts) > 1:
        odd = next(ch for ch in bare if _script(ch) not in (None, "LATIN")) if "LATIN" in scripts else \
            next(ch for ch in bare if _script(ch) and _script(ch) != _script(bare[0]))
        return (f"holds {describe(odd)} in {_shown(bare)!r}, a word that mixes scripts "
                f"({' and '.join(sorted(s.title() for s in scripts))}), so it can look like another word: "
                "write the word in one script (paths and commands in ASCII)")
    code_like = in_code or bare.startswith(("-", ".")) or bool(_CODE_INSIDE.search(bare))
    for ch in bare:
        if code_like and not ch.isascii():
            return (f"holds {describe(ch)} in {_shown(bare)!r}, which looks like a path, command or option: "
                    "write paths, commands and options in ASCII")
        if _odd_latin(ch):
            return (f"holds {describe(ch)} in {_shown(bare)!r}, a letter a reviewer would read as an ASCII one: "
                    "write it in ASCII")
    if latin_text and scripts and scripts != {"LATIN"} and all(ch in _LATIN_LOOKALIKES for ch in bare if _script(ch)):
        ch = next(ch for ch in bare if _script(ch))
        return (f"holds {describe(ch)} in {_shown(bare)!r}, a word written wholly in letters that look like Latin "
                "ones in a rule written in Latin letters: write it in ASCII")
    return None


__all__ = ["describe", "normalise", "problems"]
