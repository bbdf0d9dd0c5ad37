"""Independent check of `akbench run compare`'s statistics (docs/compare.md).

Reads the pairs (left solved, right solved) in the order akbench used, the seed and the
resample count from the JSON file named on the command line, and prints the exact McNemar
p-value (exact fractions) and the paired percentile bootstrap interval, computed the
straightforward way.
"""
import json
import sys
from fractions import Fraction
from math import comb

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next() * n) >> 64


def mcnemar(b, c):
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(Fraction(comb(n, k), 2**n) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), 2 * tail))


def bootstrap(pairs, resamples, seed):
    n = len(pairs)
    rng = SplitMix64(seed)
    sums = []
    for _ in range(resamples):
        s = 0
        for _ in range(n):
            left, right = pairs[rng.below(n)]
            s += int(right) - int(left)
        sums.append(s)
    mean = Fraction(sum(sums), resamples * n)
    sums.sort()
    k = resamples * 25 // 1000
    return sums[k] / n, sums[resamples - 1 - k] / n, float(mean)


def main():
    doc = json.load(open(sys.argv[1]))
    pairs = [(p["left_solved"], p["right_solved"]) for p in doc["pairs"]]
    b = sum(1 for l, r in pairs if l and not r)
    c = sum(1 for l, r in pairs if r and not l)
    low, high, mean = bootstrap(pairs, doc["resamples"], doc["seed"])
    print(json.dumps({"lost": b, "gained": c, "mcnemar_p": mcnemar(b, c),
                      "difference": (c - b) / len(pairs), "low": low, "high": high, "mean": mean}))


main()
