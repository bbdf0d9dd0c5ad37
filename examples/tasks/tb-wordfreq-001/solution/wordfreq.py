#!/usr/bin/env python3
"""Prints the most frequent words of a text file: `wordfreq.py FILE [N]`."""

import re
import sys
from collections import Counter


def top_words(text, n=10):
    """The n most frequent words of text (lowercased), as (word, count) pairs: most
    frequent first, ties in alphabetical order."""
    words = [w.lower() for w in re.findall(r"[A-Za-z']+", text)]
    return sorted(Counter(words).items(), key=lambda wc: (-wc[1], wc[0]))[:n]


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: wordfreq.py FILE [N]", file=sys.stderr)
        return 2
    n = int(argv[2]) if len(argv) == 3 else 10
    with open(argv[1], encoding="utf-8") as f:
        for word, count in top_words(f.read(), n):
            print(f"{word} {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
