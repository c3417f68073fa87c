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

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    what: str
    pattern: re.Pattern[str]
    fix: str


_VERBS = (r"(?:change|edit|modify|update|rewrite|replace|disable|skip|bypass|remove|delete|rotate|add|write|commit|"
          r"push|print|echo|cat|export|set|unset|copy|paste|upload|send|post|share|leak|turn\s+off|comment\s+out)")
_CREDENTIALS = (r"(?:credentials?|secrets?|tokens?|api[\s_-]?keys?|passwords?|passwd|ssh[\s_-]keys?|private[\s_-]keys?|"
                r"id_rsa|id_ed25519|\.netrc|\.npmrc|\.pypirc|\.git-credentials|\.env\b|[A-Z][A-Z0-9_]*_(?:TOKEN|KEY|SECRET))")
_CI = (r"(?:\.github/|workflows?\b|ci\b|pipelines?\b|actions?\s+(?:files?|config)|\.gitlab-ci|jenkinsfile|\.circleci|"
       r"branch\s+protection|required\s+(?:checks?|status(?:es)?)|status\s+checks?|codeowners|pre-commit\s+hooks?|"
       r"git\s+hooks?|\.git/hooks)")
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
    Refusal("invisible or direction-changing characters",
            re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]"),
            "remove them: a reviewer must see every character an agent reads"),
    Refusal("an instruction to hide or not report something",
            re.compile(r"(?i)\b(?:do\s+not|don't|dont|never|without)\s+(?:\w+\s+){0,2}?(?:mention(?:ing)?|report(?:ing)?|"
                       r"tell(?:ing)?|disclos(?:e|ing)|reveal(?:ing)?|log(?:ging)?|record(?:ing)?|cit(?:e|ing)|"
                       r"show(?:ing)?|flag(?:ging)?|notify(?:ing)?|inform(?:ing)?|explain(?:ing)?)\b|"
                       r"\b(?:hide|hiding|conceal(?:ing)?|secretly|covertly|silently|quietly|unnoticed|"
                       r"cover\s+up|keep\s+(?:it|this|that)\s+(?:secret|quiet|hidden|private))\b|"
                       r"\b(?:suppress|omit|leave\s+out|strip)\s+(?:\w+\s+){0,3}?(?:from\s+)?(?:the\s+)?"
                       r"(?:logs?|output|report|pr\s+body|pull\s+request|commit\s+message|summary|review)\b"),
            "a rule never asks agents to keep anything from the people who review their work"),
    Refusal("an instruction to change credentials",
            re.compile("(?i)" + _NEAR.format(verb=_VERBS, obj=_CREDENTIALS)),
            "credentials are for people to manage; a rule may say to stop and ask, never to touch them"),
    Refusal("an instruction to change CI",
            re.compile("(?i)" + _NEAR.format(verb=_VERBS, obj=_CI)),
            "CI is the check on agents' work; a rule may say to run a check locally, never to change or skip one"),
)


def problems(text: str) -> list[str]:
    """Why ``text`` may not be a rule, one line per kind found (empty: none), quoting what was found."""
    out = []
    for refusal in REFUSALS:
        found = refusal.pattern.search(text)
        if found:
            excerpt = found.group(0).strip()
            shown = ascii(excerpt)[1:-1] if refusal.what.startswith("invisible") else excerpt
            out.append(f"holds {refusal.what} ({shown[:60]!r}): {refusal.fix}")
    return out


__all__ = ["REFUSALS", "Refusal", "problems"]
