"""A local simulator of our own GitHub Actions workflows, for tests.

Modules: ``results`` (what a run reports), ``expressions``, ``triggers``, ``runner`` (jobs and
steps), ``actions`` (built-in stand-ins for marketplace actions) and ``entry`` (``run_workflow``
and its helpers); every public name is re-exported here.

It runs a workflow's jobs in ``needs`` order and their ``run:`` steps in real
shells, with a real event payload in ``GITHUB_EVENT_PATH``, against whatever
``api_url`` the caller gives (a ``FakeGitHub``), and returns what happened:

    with FakeGitHub("octo", "app") as gh:
        result = run_workflow(ws / ".github/workflows/replaybook-capture.yml", "issues", payload,
                              workspace=ws, api_url=gh.url, secrets={"GITHUB_TOKEN": "t"},
                              shims={"pip": 'echo "$@" >> "$RUNNER_TEMP/pip.log"'})
        assert result.jobs["capture"].result == "success", result.log()

Supported: triggers (types, workflows, branches/tags with ``*``/``**``/``!``,
dispatch inputs), ``needs``/``if:`` (status functions over all ancestors, as
GitHub does), expressions, static and dynamic matrices (include/exclude,
fail-fast), run steps (shell, working-directory, env, continue-on-error,
timeout-minutes), GITHUB_OUTPUT/ENV/PATH/STEP_SUMMARY, ``::error::``
annotations, local composite actions (nested), remote actions through
callables, with built-ins for checkout, setup-python/node, artifacts, app
tokens and a cold cache. Jobs and matrix legs run one after another. Anything else raises
NotImplementedError naming the feature, never a silent guess.

Our composite actions install Replaybook into a venv from the workspace: give
them ``stub_python(...)`` as setup-python's ``python-path`` (through ``uses=``,
which overrides the built-ins) and they run the code under test, offline.
``check_expressions(path)`` parses every expression of a workflow or action.

Deployment environments are simulated as far as secrets go (``run_workflow``'s ``environments``: a job
naming one starts only on a ref its branch policy lets in, and only it sees that environment's secrets).

Not simulated (ignored): permissions, concurrency, an environment's other protection rules, runs-on,
max-parallel, ``paths`` filters and cron (both reported in ``why``),
``::add-mask::`` (nothing is masked) and ``::stop-commands::``; ``cancelled()``
is always false and the fake GitHub does not check tokens.

Deviation kept on purpose: a step without ``shell`` runs ``bash -e`` (no
pipefail), as on GitHub; ``shell: bash`` adds ``-o pipefail``.
"""

from .actions import _BUILTINS
from .entry import check_expressions, evaluate, run_workflow, stub_python
from .expressions import (
    Evaluator,
    ExpressionError,
    parse_condition,
    parse_expression,
    split_template,
    to_string,
)
from .results import ActionContext, ActionFailed, JobResult, StepResult, WorkflowResult
from .runner import load_yaml, parse_kv_file
from .triggers import match_trigger

__all__ = [
    "_BUILTINS", "ActionContext", "ActionFailed", "Evaluator", "ExpressionError", "JobResult", "StepResult",
    "WorkflowResult", "check_expressions", "evaluate", "load_yaml", "match_trigger", "parse_condition",
    "parse_expression", "parse_kv_file", "run_workflow", "split_template", "stub_python", "to_string",
]
