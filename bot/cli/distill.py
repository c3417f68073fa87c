"""``replaybook distill``: propose rules (with replay scenarios) from unresolved incidents."""

from __future__ import annotations

from datetime import date, datetime, timezone

import click

from bot import config as config_mod
from bot.cli.output import emit_json, table
from bot.distill import plan as distill_mod
from bot.errors import BadInput, CheckFailed
from bot.settings import Environment

# A new scenario carries its fixture files in the answer: allow far more than a capture answer needs.
MAX_TOKENS = 8192


@click.command("distill")
@click.option("--min-incidents", type=click.IntRange(min=1), default=1, show_default=True,
              help="Skip groups with fewer incidents than this (a rule citing one incident is provisional).")
@click.option("--since", metavar="DATE",
              help="Only incidents created on or after DATE (2026-07-14, or a UTC time such as 2026-07-14T09:32:00Z).")
@click.option("--dry-run", is_flag=True, help="Ask the model and report what would be proposed; write nothing.")
@click.option("--model", help="The model that writes rules: `local` (the model `replaybook model install local` "
              "installs) or a hosted id (needs ANTHROPIC_API_KEY). Default: config models.distill.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of tables.")
@click.pass_context
def command(ctx: click.Context, min_incidents: int, since: str | None, dry_run: bool, model: str | None,
            as_json: bool) -> None:
    """Distill unresolved incidents into proposed rules, each with a replay scenario.

    Incidents are grouped by failure class and by shared words in their belief
    delta; a separate model reads each group and proposes one rule (at most two
    sentences, citing the incidents, with a scenario of structured checks) or a
    change to the task spec template. Every constraint is checked here, and
    every refusal is reported. Proposals go to playbook/proposed/, spec changes
    to playbook/spec-changes/; run `replaybook gate` on a proposal to admit it.

    Needs a model: `--model local` (offline, after `replaybook model install local`), or
    ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a proxy) for a hosted one.
    Exit 1 when the model failed for every group it was asked about.
    """
    settings = ctx.obj.settings
    llm = _connect(ctx.obj.env, model or settings.config.models.distill)
    progress = (lambda message: click.echo(f"… {message}", err=True)) if not as_json else (lambda _: None)
    report = distill_mod.distill(settings, llm, min_incidents=min_incidents, since=_since(since), dry_run=dry_run,
                                 progress=progress)
    if as_json:
        emit_json(report.as_json())
    else:
        click.echo(render(report), nl=False)
    if report.unreadable:
        raise BadInput(f"{len(report.unreadable)} incident file(s) could not be read and were left out; "
                       "fix them and distill again", problems=report.unreadable)
    if report.asked and report.failed == report.asked:
        raise CheckFailed(f"the model failed for all {report.asked} group(s); see the refusals above")


def _connect(env: Environment, model: str):
    if not config_mod.has_model(env, model):
        raise BadInput("distill needs a model: `--model local` after `replaybook model install local`, or set "
                       "ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a proxy) for a hosted one; "
                       "`replaybook demo` shows distill with the simulated model")
    llm = config_mod.llm(env, model, timeout_s=300)  # the adapter imports anthropic; only loaded when a model is configured
    llm.max_tokens = MAX_TOKENS
    return llm


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        if "T" not in value:
            return datetime.combine(date.fromisoformat(value), datetime.min.time(), tzinfo=timezone.utc)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"--since {value!r} is not a date; write e.g. 2026-07-14 or 2026-07-14T09:32:00Z") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def render(report: distill_mod.DistillReport) -> str:
    """The report as short markdown: proposals, spec changes, refusals."""
    head = "Distill (dry run: nothing written)" if report.dry_run else "Distill"
    lines = [f"## {head}", "",
             f"{len(report.groups)} group(s), {report.asked} asked, {len(report.proposals)} rule(s) proposed, "
             f"{len(report.spec_changes)} spec change(s), {len(report.refusals)} refusal(s)."]
    if report.simulated:
        lines.append("\n> Answers came from the SIMULATED model (offline, scripted), not a real model.")
    elif report.model_label:
        lines.append(f"\n> Answers came from {report.model_label}, offline: its cost is tokens and CPU time, $0.")
    if report.proposals:
        lines += ["", "### Proposed rules", "", table(
            ["id", "rule", "cites", "scenario", "provisional"],
            [(p.id, p.rule, ", ".join(p.cites), p.scenario + (" (new)" if p.new_scenario else ""),
              "yes" if p.provisional else "") for p in report.proposals])]
    again = [p for p in report.proposals if p.replaces]
    if again:
        lines += ["", "Re-proposed after a gate refusal (the refused proposal moves to archive/, "
                  "`retired_reason: refused`): " + "; ".join(f"{p.id} answers {', '.join(p.replaces)}" for p in again)]
    if report.standing:
        lines += ["", "Refusals that stand (re-proposals used up; a person decides): " + ", ".join(report.standing)]
    if report.spec_changes:
        lines += ["", "### Spec changes", "", table(
            ["id", "cites", "template change"],
            [(s.id, ", ".join(s.cites), s.template_change) for s in report.spec_changes])]
    if report.refusals:
        lines += ["", "### Refusals", "", table(
            ["group", "what", "reason"], [(r.group, r.what, r.reason) for r in report.refusals], width=160)]
    return "\n".join(lines) + "\n"
