#!/usr/bin/env python3
"""Replays BoardSync's workload trace (board-bench --export-trace) through Yrs (pycrdt) and Loro
(loro), with the same shapes of work as BoardSync: one document, a map per item, a stroke's
points as a list (x, y, x, y, ...), one transaction per operation. Run by bin/bench --peers.

  peers.py replay yrs|loro TRACE STATE_OUT   -> JSON figures on stdout, full state to STATE_OUT
  peers.py import yrs|loro STATE             -> JSON peak memory of importing and materializing
  peers.py table DIR [--json]                -> the comparison table from DIR's JSON files
"""
import json, resource, sys, time


def flat(points):
    out = []
    for x, y in points:
        out.append(float(x)); out.append(float(y))
    return out


def apply_loro(op, items, board, handles, lists):
    """One workload operation into a Loro doc's `items` and `board` maps (history_loro.py too)."""
    from loro import LoroList, LoroMap
    kind = op["op"]
    if kind == "stroke":
        m = items.insert_container(op["item"], LoroMap())
        m.insert("kind", "stroke"); m.insert("color", op["color"]); m.insert("width", op["width"]); m.insert("z", op["z"])
        points = m.insert_container("points", LoroList())
        for value in flat(op["points"]):
            points.push(value)
        handles[op["item"]] = m; lists[op["item"]] = points
    elif kind == "append":
        points = lists[op["item"]]
        for value in flat(op["points"]):
            points.push(value)
    elif kind == "sticker":
        m = items.insert_container(op["item"], LoroMap())
        m.insert("kind", "sticker"); m.insert("asset", op["asset"]); m.insert("position", [op["x"], op["y"]])
        m.insert("scale", op["scale"]); m.insert("rotation", op["rotation"]); m.insert("z", op["z"])
        handles[op["item"]] = m
    elif kind == "set":
        handles[op["item"]].insert(op["key"], op["value"])
    else:
        board.insert(op["key"], op["value"])


def replay_yrs(ops):
    from pycrdt import Doc, Map, Array
    doc = Doc()
    sizes = []
    doc.observe(lambda event: sizes.append(len(event.update)))
    items = doc.get("items", type=Map)
    board = doc.get("board", type=Map)
    handles = {}
    start = time.perf_counter()
    for op in ops:
        kind = op["op"]
        with doc.transaction():
            if kind == "stroke":
                m = Map({"kind": "stroke", "color": op["color"], "width": op["width"], "z": op["z"],
                         "points": Array(flat(op["points"]))})
                items[op["item"]] = m
                handles[op["item"]] = items[op["item"]]
            elif kind == "append":
                handles[op["item"]]["points"].extend(flat(op["points"]))
            elif kind == "sticker":
                items[op["item"]] = Map({"kind": "sticker", "asset": op["asset"], "position": [op["x"], op["y"]],
                                         "scale": op["scale"], "rotation": op["rotation"], "z": op["z"]})
                handles[op["item"]] = items[op["item"]]
            elif kind == "set":
                handles[op["item"]][op["key"]] = op["value"]
            else:
                board[op["key"]] = op["value"]
    apply_s = time.perf_counter() - start
    start = time.perf_counter()
    state = doc.get_update()
    encode_s = time.perf_counter() - start
    start = time.perf_counter()
    fresh = Doc()
    fresh.apply_update(state)
    fresh.get("items", type=Map).to_py()
    import_s = time.perf_counter() - start
    live = sum(sizes)
    sizes.clear()
    sticker = next(op["item"] for op in ops if op["op"] == "sticker")
    with doc.transaction():
        handles[sticker]["position"] = [1234.25, 987.5]
    return state, {"apply_s": apply_s, "live_update_bytes": live, "full_state_bytes": len(state),
                   "encode_s": encode_s, "import_s": import_s, "one_move_bytes": sum(sizes)}


def replay_loro(ops):
    from loro import LoroDoc, LoroMap, LoroList, ExportMode
    doc = LoroDoc()
    sizes = []
    subscription = doc.subscribe_local_update(lambda update: sizes.append(len(update)) or True)
    items = doc.get_map("items")
    board = doc.get_map("board")
    handles, lists = {}, {}
    start = time.perf_counter()
    for op in ops:
        apply_loro(op, items, board, handles, lists)
        doc.commit()
    apply_s = time.perf_counter() - start
    start = time.perf_counter()
    state = doc.export(ExportMode.Snapshot())
    encode_s = time.perf_counter() - start
    start = time.perf_counter()
    fresh = LoroDoc()
    fresh.import_(state)
    fresh.get_deep_value()
    import_s = time.perf_counter() - start
    live = sum(sizes)
    sizes.clear()
    sticker = next(op["item"] for op in ops if op["op"] == "sticker")
    handles[sticker].insert("position", [1234.25, 987.5])
    doc.commit()
    del subscription
    return state, {"apply_s": apply_s, "live_update_bytes": live, "full_state_bytes": len(state),
                   "encode_s": encode_s, "import_s": import_s, "one_move_bytes": sum(sizes)}


def import_peak(library, path):
    state = open(path, "rb").read()
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if library == "yrs":
        from pycrdt import Doc, Map
        doc = Doc(); doc.apply_update(state); value = doc.get("items", type=Map).to_py()
    else:
        from loro import LoroDoc
        doc = LoroDoc(); doc.import_(state); value = doc.get_deep_value()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"baseline_kb": baseline, "peak_kb": peak}))
    return value


ROWS = [
    ("apply the workload (one transaction per operation)", "apply_s", "s"),
    ("sum of live update bytes", "live_update_bytes", "bytes"),
    ("full-state bytes", "full_state_bytes", "bytes"),
    ("encode the full state", "encode_s", "s"),
    ("import the full state and materialize it", "import_s", "s"),
    ("one move, as sent live", "one_move_bytes", "bytes"),
    ("peak memory importing (growth over the process's start)", "peak_growth_kb", "KB"),
]


def table(directory, as_json):
    figures = {}
    for name in ("boardsync", "yrs", "loro"):
        row = json.load(open(f"{directory}/{name}.json"))
        peak = json.load(open(f"{directory}/{name}-peak.json"))
        row["peak_growth_kb"] = peak["peak_kb"] - peak["baseline_kb"]
        figures[name] = row
    if as_json:
        print(json.dumps(figures, indent=2, sort_keys=True))
        return
    def show(value, unit):
        if unit == "s":
            return f"{value:.3f} s"
        if unit == "bytes":
            return f"{value / 1e6:.2f} MB" if value >= 1e5 else f"{int(value)} B"
        return f"{value / 1024:.1f} MB"
    print(f"{'figure':58} {'BoardSync':>11} {'Yrs':>11} {'Loro':>11}  Yrs/BS  Loro/BS")
    for label, key, unit in ROWS:
        ours = figures["boardsync"][key]
        cells = [show(figures[name][key], unit) for name in ("boardsync", "yrs", "loro")]
        ratios = [f"{figures[name][key] / ours:6.1f}x" if ours else "   -" for name in ("yrs", "loro")]
        print(f"{label:58} {cells[0]:>11} {cells[1]:>11} {cells[2]:>11}  {ratios[0]} {ratios[1]}")
    ours = figures["boardsync"]
    if "live_update_bytes_self_contained" in ours:
        print(f"(BoardSync's live updates and move are linked batches, format 3; self-contained (format 2) they take"
              f" {show(ours['live_update_bytes_self_contained'], 'bytes')} and {show(ours['one_move_bytes_self_contained'], 'bytes')}.)")
    print("(ratios above 1: BoardSync is smaller or faster. Yrs and Loro run from Python: their")
    print(" times include the interpreter's share; BoardSync's do not. Full states: BoardSync's is")
    print(" its compacted operation set, Yrs's its v1 state update, Loro's a snapshot with history.)")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "table":
        table(sys.argv[2], "--json" in sys.argv)
        sys.exit(0)
    if len(sys.argv) < 4 or sys.argv[1] not in ("replay", "import") or sys.argv[2] not in ("yrs", "loro"):
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    if sys.argv[1] == "import":
        import_peak(sys.argv[2], sys.argv[3])
        sys.exit(0)
    ops = [json.loads(line) for line in open(sys.argv[3])]
    state, figures = (replay_yrs if sys.argv[2] == "yrs" else replay_loro)(ops)
    open(sys.argv[4], "wb").write(state)
    figures["operations"] = len(ops)
    print(json.dumps(figures))
