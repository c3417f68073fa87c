"""Grouping incidents for distill: word overlap links them, groups are packed whole into batches (see bot.distill.plan)."""


from __future__ import annotations

from dataclasses import dataclass

from bot._util.similarity import jaccard, words
from bot.incident.store import Incident

GROUP_THRESHOLD = 0.25


BATCH_MAX = 12  # incidents per prompt
# For the local model (a 1.5B model on CPU): an answer is held under its 2048-token cap and a prompt answers in
# minutes, not a quarter of an hour (bench/real_model.py: a 12-incident batch timed out at 900 s at load 20).
LOCAL_BATCH_MAX = 4


def batch_size(asked: int | None, *, local: bool) -> int:
    """Incidents per prompt: ``asked`` (default ``BATCH_MAX``), at most ``LOCAL_BATCH_MAX`` for the local model."""
    size = asked or BATCH_MAX
    return min(size, LOCAL_BATCH_MAX) if local else size


@dataclass
class Group:
    key: str  # "<failure_class>/<oldest incident id>"
    failure_class: str
    incidents: list[Incident]

    @property
    def ids(self) -> list[str]:
        return [i.id for i in self.incidents]


def delta_similarity(a: Incident, b: Incident) -> float:
    """Jaccard overlap of two incidents' belief-delta content words."""
    return jaccard(*(words(f"{i.believed} {i.actual}") for i in (a, b)))


def group_incidents(incidents: list[Incident], threshold: float = GROUP_THRESHOLD) -> list[Group]:
    """Single-link clusters of incidents, per failure class, by belief-delta word overlap."""
    ordered = sorted(incidents, key=lambda i: (i.created, i.id))
    parent = list(range(len(ordered)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a in range(len(ordered)):
        for b in range(a + 1, len(ordered)):
            x, y = ordered[a], ordered[b]
            if x.failure_class == y.failure_class and delta_similarity(x, y) >= threshold:
                parent[find(b)] = find(a)
    clusters: dict[int, list[Incident]] = {}
    for index, incident in enumerate(ordered):
        clusters.setdefault(find(index), []).append(incident)
    groups = [Group(f"{members[0].failure_class}/{members[0].id}", members[0].failure_class, members)
              for members in clusters.values()]
    return sorted(groups, key=lambda g: (g.incidents[0].created, g.incidents[0].id))


def batches(groups: list[Group], max_incidents: int = BATCH_MAX) -> list[Group]:
    """Pack the clusters, in order, into batches of at most ``max_incidents`` for one prompt each.

    Word overlap links incidents that share a wording; incidents about one
    mistake in different words score as low as unrelated ones (0.02-0.32 on the
    bundled incidents), so the model, which reads meaning, does the final
    grouping inside a batch. Clusters are never split across batches.
    """
    out: list[Group] = []
    for group in groups:
        last = out[-1] if out else None
        if last is not None and len(last.incidents) + len(group.incidents) <= max_incidents:
            last.incidents.extend(group.incidents)
            last.key = f"batch from {last.incidents[0].id} ({len(last.incidents)} incidents)"
            if last.failure_class != group.failure_class:
                last.failure_class = "mixed"
        else:
            out.append(Group(group.key, group.failure_class, list(group.incidents)))
    return out
