"""The admit gate: a rule enters the playbook only if replay proves it (:mod:`.decision`), by the sequential
test and the suite's regression test (:mod:`.stats`), over a parallel trial pool (:mod:`.pool`), per agent
(:mod:`.agents`); its cost ahead of time (:mod:`.estimate`), its ledger (:mod:`.ledger`) and its report
(:mod:`.report`), which also gives efficiency with and without the rule (:mod:`.efficiency`, its intervals in
:mod:`.intervals`) and the result per task type (:mod:`.task_types`)."""
