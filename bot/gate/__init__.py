"""The admit gate: a rule enters the playbook only if replay proves it (:mod:`.decision`), by the sequential
test and the suite's regression test (:mod:`.stats`), over a parallel trial pool (:mod:`.pool`), per agent
(:mod:`.agents`); its options, built in one place for every front door (:mod:`.options`); the gate on a rule
pull request (:mod:`.pull_request`: what it changes, :mod:`.playbook_diff` and :mod:`.instructions`, judged into
one :mod:`.verdict`); its cost ahead of time (:mod:`.estimate`), its ledger (:mod:`.ledger`) and its report
(:mod:`.report`), which also gives efficiency with and without the rule (:mod:`.efficiency`, its intervals in
:mod:`.intervals`) and the result per task type (:mod:`.task_types`)."""
