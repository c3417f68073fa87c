"""The playbook: admitted rules under a cap (:mod:`.store`), each rule and its id (:mod:`.rule`,
:mod:`.rule_ids`, :mod:`.rule_text`, the characters it may hold: :mod:`.rule_chars`), every transition planned as a Change (:mod:`.transitions`), what a rule
is worth and which retires (:mod:`.worth`), and the text agents read, rendered for every host (:mod:`.render`)."""
