"""Issue 54 analysis (docs/loop-benchmark.md, "Where the replays go"): the headline gate's replays by the kind of mode
gated, seeds 1000-1019. Run from the repository root: python bench/results/loop54/by_kind.py"""

import sys; sys.path.insert(0,'bench')
from collections import Counter
from loopbench import noisy, simgate
from loopbench.stream import StreamConfig, make_stream
from loopbench.run import LoopConfig, Week
from loopbench.noise import NoiseConfig, Noise
from loopbench.scope import ScopeConfig, Scopes
table = noisy.gates(30, simgate.issue54_options(simgate.product_options()))
by = Counter(); gates = Counter(); adm = Counter()
class Probe(noisy.NoisyRun):
    def _gate(self, week, proposal):
        before = Counter(week.replays_by)
        out = super()._gate(week, proposal)
        kind = self.stream.modes[proposal.mode].kind
        for (o, p), n in week.replays_by.items():
            d = n - before.get((o, p), 0)
            if d: by[(kind, p)] += d
        gates[kind] += 1; adm[kind] += out == ""
        return out
for sd in range(1000, 1020):
    stream = make_stream(StreamConfig(), sd)
    suite = noisy.suite_modes(stream, 30)
    noise = Noise(NoiseConfig(), sd, stream.modes, suite, Scopes(ScopeConfig(), sd, stream.modes))
    Probe("replaybook", stream, noise, LoopConfig(seed=sd), table["replaybook"], 3, True).run()
tot = sum(by.values())
for k in sorted(gates): print(k, "gates", gates[k], "admitted", adm[k], "replays", sum(v for (kk, p), v in by.items() if kk == k), {p: v for (kk, p), v in by.items() if kk == k})
print("total", tot, "admitted", sum(adm.values()))
