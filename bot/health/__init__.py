"""Playbook health: redundancy re-tests (:mod:`.redundancy`), escalating an ignored rule to enforcement
(:mod:`.escalation`) and the report (:mod:`.report`). The measures they share live with the playbook's
retirement: :mod:`bot.playbook.worth`."""
