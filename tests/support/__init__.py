"""Shared test material, by area. Test modules import from here (and from ``helpers``), never from each other.

``helpers`` holds the general builders (incident, rule and scenario files); ``support.github`` the GitHub
payloads and helpers; ``support.webhooks`` GitHub's example payloads; ``support.workflows`` the material of
the workflow simulations; ``support.traces`` replay runs on disk; ``support.trials`` replays of a script under
the kernel's trace; ``support.render`` `playbook render`'s targets and front matter; ``support.fixtures`` the
pytest fixtures, registered once in ``tests/conftest.py``.
"""
