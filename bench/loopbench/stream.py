"""A seeded stream of weeks of tasks with skewed failure-mode frequencies.

Each week holds ``tasks_per_week`` tasks: the recurring modes (a mode with
weekly rate r appears round(r * weeks) times, in weeks drawn at random), the
occasional modes (each appears once or twice in the whole stream), new
one-off modes (the long tail: ``tail_per_week`` a week, the fraction rounded
at random; each a scenario of its own, rarely seen again) and, to fill the
week, tasks the agent does right. Counts are stratified rather than Poisson
so that every seed gives nearly the same repeat share with no loop; the seed
decides which weeks, the order, and which tasks are done right.

Why a generated tail: with no loop, every failure of a mode after its first is
a repeat, so the repeat share is 1 - (distinct modes that failed) / failures.
A mode that recurs every week for W weeks gives W - 1 repeats on its own; for
the share to be 38%, distinct modes must be 62% of failures, i.e. about 1.63
new modes per repeat. Ten hand-written modes cannot supply that, so the tail is
generated one-offs, as in a real project most mistakes are new ones.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from loopbench.catalogue import Mode, hand_written, tail_mode

DEFAULT_RATES = {  # expected appearances per week of the recurring modes
    "monorepo-test-cwd": 1.0, "lint-disable": 0.5, "dynamic-module-delete": 0.33, "flaky-network-retry": 0.33,
    "generated-file-edit": 0.17, "skip-failing-test": 0.17,
}


@dataclass
class StreamConfig:
    weeks: int = 12
    tasks_per_week: int = 10
    rates: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_RATES))
    occasional_twice: float = 0.5  # chance an occasional mode appears twice (else once)
    tail_per_week: float = 2.75  # new one-off modes per week
    tail_again: float = 0.05  # chance a one-off mode comes back once, later
    occasional: tuple[str, ...] | None = None  # the occasional modes used; None: every one in the catalogue

    def as_dict(self) -> dict:
        return {"weeks": self.weeks, "tasks_per_week": self.tasks_per_week, "rates": self.rates,
                "occasional_twice": self.occasional_twice, "tail_per_week": self.tail_per_week,
                "tail_again": self.tail_again}


@dataclass(frozen=True)
class Task:
    index: int  # across the whole stream, from 0
    week: int  # from 1
    mode: str


@dataclass
class Stream:
    config: StreamConfig
    weeks: list[list[Task]]
    modes: dict[str, Mode]

    @property
    def tasks(self) -> list[Task]:
        return [t for week in self.weeks for t in week]


def _round(rng: random.Random, x: float) -> int:
    """x rounded down or up at random, so that the mean is x."""
    return int(x) + (rng.random() < x - int(x))


def _weeks_for(rng: random.Random, n: int, weeks: int) -> list[int]:
    """n appearances spread over the weeks: each week at most once until every week has one."""
    out: list[int] = []
    while len(out) < n:
        out += rng.sample(range(weeks), min(weeks, n - len(out)))
    return out


def make_stream(config: StreamConfig, seed: int) -> Stream:
    rng = random.Random(f"loop-stream:{seed}")
    catalogue = {m.id: m for m in hand_written()}
    occasional = [m.id for m in catalogue.values() if m.kind == "occasional"
                  and (config.occasional is None or m.id in config.occasional)]
    done_right = [m.id for m in catalogue.values() if m.kind == "done-right"]
    planned: list[list[str]] = [[] for _ in range(config.weeks)]
    for mode, rate in config.rates.items():
        for w in _weeks_for(rng, _round(rng, rate * config.weeks), config.weeks):
            planned[w].append(mode)
    for mode in occasional:
        times = 2 if rng.random() < config.occasional_twice else 1
        for w in sorted(rng.sample(range(config.weeks), min(times, config.weeks))):
            planned[w].append(mode)
    tail = 0
    for w in range(config.weeks):
        for _ in range(_round(rng, config.tail_per_week)):
            tail += 1
            mode = tail_mode(tail)
            catalogue[mode.id] = mode
            planned[w].append(mode.id)
            if rng.random() < config.tail_again and w + 1 < config.weeks:
                planned[rng.randrange(w + 1, config.weeks)].append(mode.id)
    weeks, index = [], 0
    for w, ids in enumerate(planned):
        rng.shuffle(ids)
        ids = ids[:config.tasks_per_week]  # a crowded week drops its extra tasks (reported as `dropped`)
        ids += [rng.choice(done_right) for _ in range(config.tasks_per_week - len(ids))]
        rng.shuffle(ids)
        week = []
        for mode in ids:
            week.append(Task(index, w + 1, mode))
            index += 1
        weeks.append(week)
    return Stream(config, weeks, catalogue)


def expected_repeat_share(config: StreamConfig) -> dict:
    """With no loop every failure-mode task fails: E[repeats] / E[failures], from the rates alone.

    A mode seen N times gives N - 1 repeats (N >= 1): a recurring mode r * W - 1,
    an occasional one its chance of a second appearance, a one-off its chance
    of coming back.
    """
    w = config.weeks
    rep = fail = 0.0
    for rate in config.rates.values():
        n = rate * w  # the mean of the random rounding
        fail += n
        rep += max(n - 1, 0.0)
    occasional = sum(1 for m in hand_written() if m.kind == "occasional"
                     and (config.occasional is None or m.id in config.occasional))
    fail += occasional * (1 + config.occasional_twice)
    rep += occasional * config.occasional_twice
    tail = config.tail_per_week * w
    again = tail * config.tail_again * (1 - 1 / w)  # about: a last-week one-off cannot come back
    fail += tail + again
    rep += again
    return {"failures": round(fail, 1), "repeats": round(rep, 1), "repeat_share": round(rep / fail, 3) if fail else 0.0}
