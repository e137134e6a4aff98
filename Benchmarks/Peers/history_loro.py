#!/usr/bin/env python3
"""Loro's checkout on BoardSync's history workload, for bin/bench --history: replays the workload
trace (board-bench --export-trace) into one Loro document, one commit per operation (as
peers.py does, and as BoardSync's history bench merges each operation as its own record), notes
the document's frontiers after the operations that end BoardSync's 100 evenly spaced versions
(version k of n is after operation min(n - 1, i * n / 100) + 1, i = 0..99), then checks each out
in order and in the same shuffled order as board-bench, timing `checkout` alone and `checkout`
followed by `get_deep_value()` (the materialized board, as BoardSync's `snapshot(at:)` gives).

  history_loro.py TRACE   -> JSON figures on stdout
"""
import json, sys, time

from peers import apply_loro


def shuffled_order():
    # board-bench's seeded shuffle (HistoryBench.swift): a 64-bit LCG, Fisher-Yates from the end.
    order = list(range(100))
    seed = 27
    for at in range(99, 0, -1):
        seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        j = (seed >> 33) % (at + 1)
        order[at], order[j] = order[j], order[at]
    return order


def percentiles(times):
    times = sorted(times)
    return {"p50_ms": times[49] * 1000, "p99_ms": times[98] * 1000, "max_ms": times[99] * 1000}


def main(path):
    from loro import LoroDoc
    ops = [json.loads(line) for line in open(path)]
    count = len(ops)
    wanted = {min(count - 1, i * count // 100): i for i in range(100)}
    frontiers = [None] * 100
    doc = LoroDoc()
    items = doc.get_map("items")
    board = doc.get_map("board")
    handles, lists = {}, {}
    start = time.perf_counter()
    for index, op in enumerate(ops):
        apply_loro(op, items, board, handles, lists)
        doc.commit()
        if index in wanted:
            frontiers[wanted[index]] = doc.oplog_frontiers
    replay_s = time.perf_counter() - start
    figures = {"operations": count, "replay_s": replay_s}
    for name, order in (("in_order", list(range(100))), ("shuffled", shuffled_order())):
        checkout, materialized = [], []
        for i in order:
            t0 = time.perf_counter()
            doc.checkout(frontiers[i])
            t1 = time.perf_counter()
            value = doc.get_deep_value()
            t2 = time.perf_counter()
            checkout.append(t1 - t0)
            materialized.append(t2 - t0)
            del value
        doc.checkout_to_latest()
        figures[f"checkout_{name}"] = percentiles(checkout)
        figures[f"checkout_and_value_{name}"] = percentiles(materialized)
    print(json.dumps(figures))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    main(sys.argv[1])
