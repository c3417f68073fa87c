"""Issue 54 analysis (docs/loop-benchmark.md, "What the harmful admissions are"): each harmful admission of the
headline gate, by kind, area and the chance its victim reads the area. python bench/results/loop54/harm_kinds.py 1000 1060"""

import sys

sys.path.insert(0, "bench")

from collections import Counter
from loopbench import noisy, simgate
from loopbench.stream import StreamConfig, make_stream
from loopbench.run import LoopConfig
from loopbench.noise import NoiseConfig, Noise
from loopbench.scope import ScopeConfig, Scopes
table = noisy.gates(30, simgate.issue54_options(simgate.product_options()))
c = Counter()
for sd in range(int(sys.argv[1]), int(sys.argv[2])):
    stream = make_stream(StreamConfig(), sd)
    suite = noisy.suite_modes(stream, 30)
    sc = Scopes(ScopeConfig(), sd, stream.modes)
    noise = Noise(NoiseConfig(), sd, stream.modes, suite, sc)
    run = noisy.NoisyRun("replaybook", stream, noise, LoopConfig(seed=sd), table["replaybook"], 3, True)
    run.run()
    for r in run.rules:
        if noise.harms(r):
            if r.kind == "self-harm":
                c["self-harm"] += 1; continue
            ch = sc.reach_chance(r.scope, r.area, r.victim)
            home = sc.home(r.victim) == r.area if r.area else None
            c[("cross", "area" if r.area else "noarea", "victim home" if home else "victim touch %.2f" % ch if r.area else "", "drop %.2f"%r.drop)] += 1
    c["admitted"] += len(run.rules)
for k,v in sorted(c.items(), key=str): print(k, v)
