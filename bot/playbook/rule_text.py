"""Rule text read as what it is: instructions agents will obey. The one list of what a rule may never say.

A replay proves that a rule helps on its scenario; it cannot prove that the
rule does nothing else. The scenario is the rule author's own, so a rule that
tells agents to fetch a script, decode a blob, keep something out of the PR
or touch credentials or CI could be "proven" by a scenario that never
exercises that part. Such text is refused wherever a rule is parsed (the
``rule`` field of :class:`bot.playbook.rule.Rule`), so it is never admitted and never
rendered, on GitHub or locally.

Each entry is (what it is, a pattern, why and what to write instead). The
tests (tests/playbook/test_rule_text.py) hold one example each that must be refused
and the ordinary rules that must not.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass

from bot.playbook import rule_chars


@dataclass(frozen=True)
class Refusal:
    what: str
    pattern: re.Pattern[str]
    fix: str
    counts: Callable[[str], bool] | None = None  # a match counts only if this holds of it (None: every match)

    negatable: bool = False  # "never skip the test" says the opposite of "skip the test"

    def find(self, text: str) -> str | None:
        for found in self.pattern.finditer(text):
            if self.negatable and _NEGATED.search(text[: found.start()]):
                continue
            if self.counts is None or self.counts(found.group(0)):
                return found.group(0)
        return None


# A negation at most two words before: "never skip", "do not add disable comments", "rather than xfail it";
# "do not hesitate to skip" is no negation.
_NEGATED = re.compile(r"(?i)\b(?:never|not|n't|no|nor|avoid|without|instead\s+of|rather\s+than)\b"
                      r"(?!\s+(?:hesitate|forget|fail|wait)\b)(?:[\s,]+[\w'-]+){0,2}[\s,]+$")


def _reads_as_text(blob: bytes) -> bool:
    """Bytes that are plain text (what an encoded instruction decodes to), not the noise a word decodes to."""
    return len(blob) >= 4 and all(32 <= b < 127 or b in (9, 10) for b in blob) \
        and sum(chr(b).isalpha() for b in blob) * 2 >= len(blob)


def _decodes_to_text(token: str) -> bool:
    """A short token that is base64 or hex of plain text (``Z2l0IHB1c2ggLWY=`` is ``git push -f``)."""
    token = token.strip("=")
    if re.fullmatch(r"(?:[0-9a-fA-F]{2}){4,}", token):
        try:
            if _reads_as_text(bytes.fromhex(token)):
                return True
        except ValueError:
            pass
    padded = token + "=" * (-len(token) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            if len(token) % 4 != 1 and _reads_as_text(decode(padded)):
                return True
        except (binascii.Error, ValueError):
            continue
    return False


_VERBS = (r"(?:change|edit|modify|update|rewrite|replace|disable|skip|bypass|remove|delete|rotate|add|write|commit|"
          r"push|print|echo|cat|export|set|unset|copy|paste|upload|send|post|share|leak|turn\s+off|comment\s+out)")
_CREDENTIALS = (r"(?:credentials?|secrets?|tokens?|api[\s_-]?keys?|passwords?|passwd|ssh[\s_-]keys?|private[\s_-]keys?|"
                r"id_rsa|id_ed25519|\.netrc|\.npmrc|\.pypirc|\.git-credentials|\.env\b|[A-Z][A-Z0-9_]*_(?:TOKEN|KEY|SECRET))")
_CI = (r"(?:\.github/|workflows?\b|ci\b|pipelines?\b|actions?\s+(?:files?|config)|\.gitlab-ci|jenkinsfile|\.circleci|"
       r"branch\s+protection|required\s+(?:checks?|status(?:es)?)|status\s+checks?|codeowners|pre-commit\s+hooks?|"
       r"git\s+hooks?|\.git/hooks)")
_RUNS = (r"\b(?:sh|bash|zsh|dash|ksh|fish|source|python[\d.]*|perl|ruby|node|php|pwsh|powershell|iex|exec|eval|"
         r"start-process|run\s+(?:it|them|that|this)|execute)\b|\bchmod\s+\S*x|(?:^|[\s;&|(])\.{1,2}/\S|"
         r"(?:^|[\s;&|(])\.\s+\S")
_SKIP_VERBS = (r"(?:skip|skipping|skipped|xfail|disable|disabling|deselect|deselecting|ignore|ignoring|mute|muting|"
               r"silence|silencing|quarantine|quarantining|bypass|bypassing|suppress|suppressing|"
               r"comment(?:ing)?\s+out)")
_TESTS = (r"(?:tests?|specs?|test\s+cases?|testcases?|assertions?|asserts?|checks?|hooks?|linters?|lint|"
          r"type[\s-]?check(?:s|er|ing)?|coverage|suites?|warnings?)")
_NEAR = r"\b{verb}\b(?:\W+[\w.-]+){{0,4}}?\W+{obj}"

REFUSALS: tuple[Refusal, ...] = (
    Refusal("a URL", re.compile(r"(?i)\b(?:https?|ftp|file|ssh|git|s3|gs)://\S+|\bwww\.[a-z0-9-]+\.[a-z]{2,}\S*"),
            "a rule names no address agents would fetch or trust; name the file, package or command instead"),
    Refusal("a shell pipeline into an interpreter",
            re.compile(r"(?i)\|\s*(?:sudo\s+)?(?:env\s+)?(?:sh|bash|zsh|dash|ksh|fish|python[\d.]*|perl|ruby|node|php|"
                       r"pwsh|powershell|iex|source)\b|\b(?:sh|bash|zsh|source)\s+<\(|\$\(\s*(?:curl|wget)\b|"
                       r"\b(?:eval|exec)\s+[\"'`]?\$\(|\b(?:curl|wget)\b[^|]*\|"),
            "a rule never has agents run what a download or a pipe hands them; name the command itself"),
    Refusal("an encoded blob",
            re.compile(r"(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Z])(?=[A-Za-z0-9+/_-]*[a-z])"
                       r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}|\b[0-9a-fA-F]{32,}\b|"
                       r"(?:\\x[0-9a-fA-F]{2}){3,}|(?:%[0-9a-fA-F]{2}){3,}|(?:\\u[0-9a-fA-F]{4}){2,}|"
                       r"\bbase64\s+(?:-d|--decode|-D)\b|\b(?:b64decode|atob|fromCharCode|xxd\s+-r)\b"),
            "a rule is read as plain words: write out what it means, never an encoded form of it"),
    Refusal("an encoded blob",
            re.compile(r"(?<![\w+/-])[A-Za-z0-9+/_-]{8,}={0,2}(?![\w+/=-])"),
            "a rule is read as plain words: write out what it means, never an encoded form of it",
            counts=_decodes_to_text),
    Refusal("an encoded blob",
            re.compile(r"(?i)\bbase\s?(?:32|64)\b[^.]{0,60}?\b(?:-d\b|--decode|decod\w*)|"
                       r"\bdecod\w*\b[^.]{0,60}?\bbase\s?(?:32|64)\b|\b(?:uudecode|base32\s+-d)\b"),
            "a rule is read as plain words: write out what it means, never an encoded form of it"),
    Refusal("a download that is then run",
            re.compile(r"(?i)\b(?:curl|wget|aria2c|iwr|irm|invoke-webrequest|invoke-restmethod|certutil|bitsadmin|"
                       r"start-bitstransfer)\b.{0,200}?(?:" + _RUNS + r")|"
                       r"\b(?:download|fetch|grab|retrieve|pull\s+down)\w*\b.{0,80}?\b(?:script|installer|binary|"
                       r"executable|program|[\w-]+\.(?:sh|bash|ps1|py|pl|rb|js|exe|bat|cmd|run|bin))\b"
                       r".{0,80}?\b(?:run|execute|exec|source|launch|invoke|start)\w*\b"),
            "a rule never has agents run what they download; name the command or package the repository pins"),
    Refusal("an instruction to hide or not report something",
            re.compile(r"(?i)\b(?:do\s+not|don't|dont|never|without)\s+(?:\w+\s+){0,2}?(?:mention(?:ing)?|report(?:ing)?|"
                       r"tell(?:ing)?|disclos(?:e|ing)|reveal(?:ing)?|log(?:ging)?|record(?:ing)?|cit(?:e|ing)|"
                       r"show(?:ing)?|flag(?:ging)?|notify(?:ing)?|inform(?:ing)?|explain(?:ing)?)\b|"
                       r"\b(?:hide|hiding|conceal(?:ing)?|secretly|covertly|silently|quietly|unnoticed|"
                       r"cover\s+up|keep\s+(?:it|this|that)\s+(?:secret|quiet|hidden|private))\b|"
                       r"\b(?:suppress|omit|leave\s+out|strip)\s+(?:\w+\s+){0,3}?(?:from\s+)?(?:the\s+)?"
                       r"(?:logs?|output|report|pr\s+body|pull\s+request|commit\s+message|summary|review)\b"),
            "a rule never asks agents to keep anything from the people who review their work"),
    Refusal("an instruction to skip or disable tests or checks",
            re.compile(r"(?i)" + r"\b{v}\b(?:\s+[\w.-]+){{0,3}}?\s+{o}\b".format(v=_SKIP_VERBS, o=_TESTS) + "|"
                       r"\b(?:skip|xfail|deselect|disable|mute|quarantine|comment\s+out)\s+(?:it|them|this|that)\b|"
                       r"\b(?:delete|remove|drop)\w*\s+(?:\w+\s+){0,2}?(?:failing|flaky|broken|red)\s+" + _TESTS + "|"
                       r"\bpytest\.mark\.(?:skip|skipif|xfail)\b|@(?:skip|xfail|unittest\.skip)\w*|"
                       r"\bunittest\.skip\w*|\b(?:it|test|describe|context)\.(?:skip|todo)\b|"
                       r"\bx(?:it|describe|test)\b|@(?:Disabled|Ignore)\b|#\[ignore\]|\bt\.Skip\w*|"
                       r"--no-verify\b|--deselect\b|--ignore(?:-glob)?\b|-k\s+[\"']?not\b|\|\|\s*(?:true|:)(?!\w)|"
                       r"continue-on-error|\bSKIP=|\bHUSKY=0|--skip-?tests?\b|-DskipTests|maven\.test\.skip|"
                       r"#\s*noqa\b|\bnoqa\b|type:\s*ignore|eslint-disable|//\s*nolint|pragma:\s*no\s*cover|"
                       r"--exit-zero\b"),
            "the tests and checks are how people know agents' work is right; a rule may say how to run or fix "
            "them, never to skip, disable, mark or comment them out, even for now", negatable=True),
    Refusal("an instruction to change credentials",
            re.compile("(?i)" + _NEAR.format(verb=_VERBS, obj=_CREDENTIALS)),
            "credentials are for people to manage; a rule may say to stop and ask, never to touch them"),
    Refusal("an instruction to change CI",
            re.compile("(?i)" + _NEAR.format(verb=_VERBS, obj=_CI)),
            "CI is the check on agents' work; a rule may say to run a check locally, never to change or skip one"),
)


# The most of a rule's text the checks read. A rule is at most 400 characters (``bot.playbook.rule``); some of the
# patterns above cost more than linear time on long text (a run of base64 words: each match scans what precedes
# it for a negation), so the size is checked first, before and after NFKC (which can lengthen a character 18-fold),
# and a text past it is refused by its size alone, whatever it holds: a 1 MiB value costs one ``len``.
TEXT_CAP = 2000


def too_long(text: str) -> str | None:
    """The refusal of a text past ``TEXT_CAP`` characters, or None."""
    if len(text) <= TEXT_CAP:
        return None
    return (f"is {len(text)} characters, past the {TEXT_CAP} its checks read; a rule is at most 400: "
            "say when it applies and what to do, in two sentences")


def problems(text: str) -> list[str]:
    """Why ``text`` may not be a rule, one line per kind found (empty: none), quoting what was found.

    Its size first (``TEXT_CAP``: past it nothing else is read), then the text in its normal form
    (:func:`bot.playbook.rule_chars.normalise`, the form a rule is stored in): first every character
    (:mod:`bot.playbook.rule_chars`), then what it says."""
    if (long := too_long(text)) is not None:
        return [long]
    out = rule_chars.problems(text)
    text = rule_chars.normalise(text)
    if (long := too_long(text)) is not None:
        return [*out, long]
    for refusal in REFUSALS:
        found = refusal.find(text)
        line = found is not None and f"holds {refusal.what} ({found.strip()[:60]!r}): {refusal.fix}"
        if line and line not in out and not any(o.startswith(f"holds {refusal.what} ") for o in out):
            out.append(line)
    return out


__all__ = ["REFUSALS", "Refusal", "TEXT_CAP", "problems", "too_long"]
