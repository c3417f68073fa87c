"""Distill: a separate model pass turns unresolved incidents into proposed rules, each with a replay scenario;
when incidents trace back to an ambiguous spec, it proposes a spec change instead (:mod:`.spec_change`)."""
