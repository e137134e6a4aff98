#!/usr/bin/env python3
"""The web view in a real browser: Debian's Chromium driven by Playwright (nothing downloaded).

Usage: browser_test.py BOARD_SYNC_BINARY [CHROMIUM]

Starts `board-sync serve --web` on free loopback ports with a board made by the CLI, opens two
pages on it and checks, in order: the board is fitted to the window (in a small window too, and
again when the window is resized), zoom keeps to 0.05x-16x; at 100%, a stroke drawn with the
mouse in page 1 appears in page 2; a sticker dragged in page 2 moves in page 1; a PNG chosen in
page 1 becomes a sticker in page 2; a CLI replica syncing through the server sees both edits, and
its own move appears in both pages; page 1's cursor is visible in page 2; zoomed and panned
(Ctrl+wheel about the cursor, middle button, space, wheel, two fingers), a stroke drawn, a
sticker dragged and a PNG dropped land at the board points under the mouse in the other page and
the CLI replica, and pointers at the same board point in both pages; with the server stopped a
page says it is disconnected, and once it is back the page reconnects and catches up; a page
with a read token pans with any drag; a screenshot of the board matches the CLI's PNG export of the same board closely (not bit for bit).
Board points on the screen are measured from the page's layout (the board's rectangle, #paper),
not from the page's own conversion. Prints one line per check and "browser: N passed, M failed"; exits 1 on any failure.
"""
import base64, json, os, re, shutil, struct, subprocess, sys, tempfile, threading, time, zlib

from playwright.sync_api import sync_playwright

BINARY = os.path.abspath(sys.argv[1])
CHROMIUM = sys.argv[2] if len(sys.argv) > 2 else shutil.which("chromium") or "/usr/bin/chromium"
passed, failed = 0, 0


def check(name, condition, detail=""):
    global passed, failed
    if condition:
        passed += 1
        print(f"  ok   {name}")
    else:
        failed += 1
        print(f"  FAIL {name} {detail}")


def check_within(name, wait):
    """`wait()` is a Playwright wait; the check passes when it returns before its timeout."""
    try:
        wait()
        check(name, True)
    except Exception as error:
        check(name, False, str(error))


def png(width, height, rgb):
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def cli(*args, cwd):
    result = subprocess.run([BINARY, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"board-sync {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def wait_for_line(process, pattern, timeout=20):
    deadline = time.time() + timeout
    lines = []
    while time.time() < deadline:
        line = process.stderr.readline()
        if not line:
            time.sleep(0.05)
            continue
        lines.append(line)
        match = re.search(pattern, line)
        if match:
            return match.group(1)
    raise RuntimeError(f"no line matching {pattern!r} in: {''.join(lines)}")


def drain(process):
    """Reads the server's log from here on (and drops it): a server whose stderr pipe fills
    (64 KiB of log lines nobody reads) blocks in its next write and never stops."""
    threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()


BOARD_W, BOARD_H = 480, 320


def paper(page):
    """The board's rectangle on the screen, from the page's layout (its fill, not its outline)."""
    return page.evaluate("() => { const r = document.getElementById('paper').getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; }")


def to_screen(page, x, y):
    box = paper(page)
    return box["x"] + x * box["width"] / BOARD_W, box["y"] + y * box["height"] / BOARD_H


def to_board(page, sx, sy):
    box = paper(page)
    return (sx - box["x"]) * BOARD_W / box["width"], (sy - box["y"]) * BOARD_H / box["height"]


def zoom_of(page):
    return paper(page)["width"] / BOARD_W


def translate_of(page, selector):
    """The first two numbers of `selector`'s transform (a sticker's or cursor's board point)."""
    value = page.locator(selector).first.get_attribute("transform") or ""
    numbers = re.findall(r"-?[0-9.]+(?:e-?[0-9]+)?", value)
    return (float(numbers[0]), float(numbers[1])) if len(numbers) >= 2 else None


def near(a, b, tolerance):
    return a is not None and b is not None and all(abs(p - q) <= tolerance for p, q in zip(a, b))


def inside_window(page, sx, sy):
    size = page.viewport_size
    bar = page.locator("#bar").bounding_box()
    return 0 <= sx <= size["width"] and bar["y"] + bar["height"] <= sy <= size["height"]


def main():
    work = tempfile.mkdtemp(prefix="boardsync-browser-")
    server = None
    try:
        with open(os.path.join(work, "red.png"), "wb") as f:
            f.write(png(40, 40, (220, 30, 30)))
        cli("new", "Cli.boardpkg", "--canvas", "480x320", cwd=work)
        sticker = json.loads(cli("sticker", "Cli.boardpkg", "--image", "red.png", "--at", "100,100", "--json", cwd=work))["id"]
        # The web view's token is kept in a file so the pages reconnect after the restart below.
        server = subprocess.Popen([BINARY, "serve", "--data", "data", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0",
                                   "--web-token-file", "web-token"],
                                  cwd=work, stderr=subprocess.PIPE, text=True)
        sync_address = wait_for_line(server, r"listening on (\S+)")
        web_address = wait_for_line(server, r"web view at http://([^/\s]+)/")
        drain(server)
        with open(os.path.join(work, "web-token")) as f:
            web_token = f.read().strip()
        cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
        url = f"http://{web_address}/b/demo?token={web_token}"

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context(viewport={"width": 1000, "height": 700}, device_scale_factor=1)
            page1, page2 = context.new_page(), context.new_page()
            for page in (page1, page2):
                page.goto(url)
                page.wait_for_selector("#status.live", timeout=20000)
                page.wait_for_selector(f'[data-id="{sticker}"]', timeout=20000)
            check("both pages show the board live", True)

            # The board is fitted to the window: all of it in sight, as large as the window allows.
            stage = page1.locator("#stage").bounding_box()
            box = paper(page1)
            fits = (box["x"] >= stage["x"] and box["y"] >= stage["y"] and box["x"] + box["width"] <= stage["x"] + stage["width"]
                    and box["y"] + box["height"] <= stage["y"] + stage["height"]
                    and min(stage["width"] - box["width"], stage["height"] - box["height"]) <= 33)
            check("the board is fitted to the window on load", fits, json.dumps([stage, box]))
            small = context.new_page()
            small.set_viewport_size({"width": 400, "height": 300})
            small.goto(url)
            small.wait_for_selector(f'[data-id="{sticker}"]', timeout=20000)
            small.wait_for_function("() => document.getElementById('paper').getAttribute('width') === '480'", timeout=20000)
            corners = [to_screen(small, x, y) for x, y in ((0, 0), (BOARD_W, 0), (0, BOARD_H), (BOARD_W, BOARD_H))]
            hit = small.evaluate("""([x, y]) => { const n = document.elementFromPoint(x, y); return !!n && !!n.closest('svg#board'); }""",
                                 [corners[0][0] + 2, corners[0][1] + 2])
            check("in a 400x300 window the whole board is in sight below the toolbar",
                  all(inside_window(small, x, y) for x, y in corners) and hit, json.dumps(corners))
            small.set_viewport_size({"width": 900, "height": 650})
            small.wait_for_timeout(300)
            corners2 = [to_screen(small, x, y) for x, y in ((0, 0), (BOARD_W, BOARD_H))]
            check("resized, the window is fitted again", all(inside_window(small, x, y) for x, y in corners2)
                  and corners2[1][0] - corners2[0][0] > corners[3][0] - corners[0][0] + 100, json.dumps([corners, corners2]))
            # Keys: + zooms in about the middle, 0 fits again; zoom stays within 0.05x-16x.
            fitted = zoom_of(small)
            small.keyboard.press("+")
            zoomed = zoom_of(small)
            small.keyboard.press("0")
            check("+ zooms in 1.25x and 0 fits again", abs(zoomed / fitted - 1.25) < 0.01 and abs(zoom_of(small) - fitted) < 0.001,
                  f"{fitted} {zoomed} {zoom_of(small)}")
            for _ in range(30):
                small.click("#zoomout")
            lowest = float(small.locator("svg#board").get_attribute("data-zoom"))
            for _ in range(40):
                small.click("#zoomin")
            highest = float(small.locator("svg#board").get_attribute("data-zoom"))
            check("zoom stays within 0.05x and 16x", lowest == 0.05 and highest == 16 and abs(zoom_of(small) - 16) < 0.01,
                  f"{lowest} {highest}")
            small.close()

            # At 100%, a stroke drawn with the mouse in page 1 appears in page 2.
            for page in (page1, page2):
                page.click("#actual")
            box = paper(page1)
            page1.mouse.move(box["x"] + 200, box["y"] + 200)
            page1.mouse.down()
            for step in range(1, 12):
                page1.mouse.move(box["x"] + 200 + step * 12, box["y"] + 200 + step * 5)
            page1.mouse.up()
            check_within("a stroke drawn in page 1 appears in page 2", lambda: page2.wait_for_selector('[data-kind="stroke"]', timeout=20000))

            # A sticker dragged in page 2 moves in page 1.
            page2.click("#hand")
            box2 = paper(page2)
            page2.mouse.move(box2["x"] + 100, box2["y"] + 100)
            page2.mouse.down()
            for step in range(1, 9):
                page2.mouse.move(box2["x"] + 100 + step * 10, box2["y"] + 100 + step * 5)
            page2.mouse.up()
            def wait():
                page1.wait_for_function(
                    "id => { const n = document.querySelector(`[data-id=\"${id}\"]`); return n && n.getAttribute('transform').startsWith('translate(180 140)'); }",
                    arg=sticker, timeout=20000)
            check_within("a sticker dragged in page 2 moves in page 1", wait)

            # A sticker added in page 1 by choosing a PNG file appears in page 2.
            with open(os.path.join(work, "blue.png"), "wb") as f:
                f.write(png(24, 16, (30, 60, 220)))
            page1.set_input_files("#file", os.path.join(work, "blue.png"))
            check_within("a sticker chosen as a PNG file in page 1 appears in page 2", lambda: page2.wait_for_function("() => document.querySelectorAll('[data-kind=sticker]').length === 2", timeout=20000))

            # A CLI replica syncing through the server sees both edits; its own move shows in both pages.
            cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
            shown = json.loads(cli("show", "Cli.boardpkg", "--json", cwd=work))
            placed = [s for s in shown["stickers"] if s["id"] == sticker]
            check("the CLI replica sees page 1's stroke and sticker", len(shown["strokes"]) == 1 and len(shown["stickers"]) == 2,
                  json.dumps(shown)[:300])
            check("the CLI replica sees page 2's drag", placed and placed[0]["position"] == {"x": 180, "y": 140},
                  json.dumps(placed)[:200])
            cli("move", "Cli.boardpkg", sticker, "--to", "300,60", cwd=work)
            cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
            for name, page in (("page 1", page1), ("page 2", page2)):
                def wait():
                    page.wait_for_function(
                        "id => { const n = document.querySelector(`[data-id=\"${id}\"]`); return n && n.getAttribute('transform').startsWith('translate(300 60)'); }",
                        arg=sticker, timeout=20000)
                check_within(f"the CLI's move appears in {name}", wait)

            # Page 1's cursor is visible in page 2.
            page1.mouse.move(box["x"] + 50, box["y"] + 60)
            page1.mouse.move(box["x"] + 55, box["y"] + 62)
            try:
                page2.wait_for_selector("#cursors .cursor text", timeout=20000)
                label = page2.locator("#cursors .cursor text").first.text_content()
                check("page 1's cursor is visible in page 2", label.startswith("web"), label)
            except Exception as error:
                check("page 1's cursor is visible in page 2", False, str(error))

            # Zoomed and panned, edits and pointers land at the board point under the mouse.
            def settled(page, before):
                page.wait_for_function("z => document.getElementById('board').getAttribute('data-zoom') !== z", arg=before, timeout=5000)
                page.wait_for_timeout(100)

            def zoom_attr(page):
                return page.locator("svg#board").get_attribute("data-zoom")

            def strokes(page):
                return page.locator('[data-kind="stroke"]').count()

            under = to_board(page1, 400, 300)
            page1.mouse.move(400, 300)
            before = zoom_attr(page1)
            page1.keyboard.down("Control")
            page1.mouse.wheel(0, -120)
            page1.mouse.wheel(0, -120)
            page1.keyboard.up("Control")
            settled(page1, before)
            page1.wait_for_timeout(200)
            check("Ctrl+wheel zooms in about the cursor", zoom_of(page1) > 2 and near(to_board(page1, 400, 300), under, 0.5),
                  f"zoom {zoom_of(page1)}, {under} -> {to_board(page1, 400, 300)}")
            moves = []
            start = paper(page1)
            page1.mouse.move(500, 400)
            page1.mouse.down(button="middle")
            page1.mouse.move(470, 380, steps=4)
            page1.mouse.move(440, 350, steps=4)
            page1.mouse.up(button="middle")
            moves.append((paper(page1)["x"] - start["x"], paper(page1)["y"] - start["y"]))
            start = paper(page1)
            page1.keyboard.down("Space")
            page1.mouse.down()
            page1.mouse.move(460, 370, steps=4)
            page1.mouse.move(480, 380, steps=4)
            page1.mouse.up()
            page1.keyboard.up("Space")
            moves.append((paper(page1)["x"] - start["x"], paper(page1)["y"] - start["y"]))
            start = paper(page1)
            page1.mouse.wheel(30, 40)
            page1.wait_for_function("x => document.getElementById('paper').getBoundingClientRect().x !== x", arg=start["x"], timeout=5000)
            moves.append((paper(page1)["x"] - start["x"], paper(page1)["y"] - start["y"]))
            check("the middle button, space and the wheel pan the board and draw nothing",
                  near(moves[0], (-60, -50), 0.5) and near(moves[1], (40, 30), 0.5) and near(moves[2], (-30, -40), 0.5)
                  and strokes(page1) == 1, json.dumps(moves))

            zoom = zoom_of(page1)
            path = [(500, 400), (515, 405), (530, 412), (545, 420), (560, 430)]
            expected = [to_board(page1, x, y) for x, y in path]
            page1.mouse.move(*path[0])
            page1.mouse.down()
            for point in path[1:]:
                page1.mouse.move(*point)
            page1.mouse.up()
            check_within("zoomed and panned, a stroke drawn in page 1 appears in page 2",
                         lambda: page2.wait_for_function("() => document.querySelectorAll('[data-kind=stroke]').length === 2", timeout=20000))
            cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
            shown = json.loads(cli("show", "Cli.boardpkg", "--json", cwd=work))
            new = [s for s in shown["strokes"] if len(s["points"]) == len(path)]
            landed = [(p["x"], p["y"]) for p in new[0]["points"]] if new else []
            check(f"it reaches the CLI replica at the board points under the mouse (zoom {zoom:.2f})",
                  len(landed) == len(expected) and all(near(a, b, 0.1) for a, b in zip(landed, expected)),
                  json.dumps([landed, expected]))

            # Pointers, both ways, at the same board point in pages with different views.
            def cursor_in(page, name):
                return page.evaluate("""name => { for (const g of document.querySelectorAll('#cursors .cursor')) {
                    if (g.querySelector('text').textContent !== name) continue;
                    const m = g.getAttribute('transform').match(/translate[(]([-0-9.e]+) ([-0-9.e]+)[)]/);
                    const box = g.querySelector('path').getBoundingClientRect();
                    return [Number(m[1]), Number(m[2]), box.x, box.y]; } return null; }""", name)

            def pointer_lands(sender, receiver, at):
                name = sender.locator("#mode").text_content().replace("you are ", "")
                point = to_board(sender, *at)
                sender.mouse.move(at[0] - 3, at[1] - 3)
                sender.wait_for_timeout(120)
                sender.mouse.move(*at)
                deadline = time.time() + 10
                shown = None
                while time.time() < deadline:
                    shown = cursor_in(receiver, name)
                    if shown and near(shown[:2], point, 0.1):
                        break
                    receiver.wait_for_timeout(100)
                on_screen = to_screen(receiver, *point)
                return shown is not None and near(shown[:2], point, 0.1) and near(shown[2:], on_screen, 1), json.dumps([shown, point, on_screen])

            ok, detail = pointer_lands(page1, page2, (520, 380))
            check("page 1's pointer (zoomed) shows in page 2 (at 100%) at the same board point", ok, detail)

            # A sticker dragged in a zoomed page moves by the board distance.
            at = tuple(round(v) for v in to_screen(page2, 300, 60))
            page2.mouse.move(*at)
            before = zoom_attr(page2)
            page2.keyboard.down("Control")
            page2.mouse.wheel(0, -120)
            page2.keyboard.up("Control")
            settled(page2, before)
            zoom2 = zoom_of(page2)
            start = to_board(page2, *at)
            page2.mouse.down()
            page2.mouse.move(at[0] + 33, at[1] + 15, steps=4)
            page2.mouse.move(at[0] + 66, at[1] + 33, steps=4)
            page2.mouse.up()
            target = (300 + 66 / zoom2, 60 + 33 / zoom2)
            def wait():
                page1.wait_for_function(
                    """([id, x, y]) => { const n = document.querySelector(`[data-id="${id}"]`);
                       const m = n && n.getAttribute('transform').match(/translate[(]([-0-9.e]+) ([-0-9.e]+)[)]/);
                       return m && Math.abs(Number(m[1]) - x) <= 0.1 && Math.abs(Number(m[2]) - y) <= 0.1; }""",
                    arg=[sticker, target[0], target[1]], timeout=20000)
            check_within(f"a sticker dragged 66,33 px in page 2 at zoom {zoom2:.2f} moves {66 / zoom2:.2f},{33 / zoom2:.2f} board points in page 1", wait)
            ok, detail = pointer_lands(page2, page1, (at[0] + 100, at[1] + 80))
            check("page 2's pointer (zoomed) shows in page 1 at the same board point", ok, detail)

            # A PNG dropped in the zoomed page lands at the board point under the drop.
            drop = (at[0] + 140, at[1] + 60)
            drop_point = to_board(page2, *drop)
            page2.evaluate("""([b64, x, y]) => {
                const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
                const data = new DataTransfer();
                data.items.add(new File([bytes], "green.png", {type: "image/png"}));
                document.elementFromPoint(x, y).dispatchEvent(new DragEvent("drop", {bubbles: true, cancelable: true, clientX: x, clientY: y, dataTransfer: data}));
            }""", [base64.b64encode(png(10, 10, (30, 200, 30))).decode(), drop[0], drop[1]])
            page1.wait_for_function("() => document.querySelectorAll('[data-kind=sticker]').length === 3", timeout=20000)
            cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
            shown = json.loads(cli("show", "Cli.boardpkg", "--json", cwd=work))
            dragged = [(s["position"]["x"], s["position"]["y"]) for s in shown["stickers"] if s["id"] == sticker]
            dropped = [(s["position"]["x"], s["position"]["y"]) for s in shown["stickers"] if abs(s["position"]["x"] - drop_point[0]) < 1]
            check("the CLI replica has the zoomed drag and drop at their board points",
                  dragged and near(dragged[0], target, 0.1) and dropped and near(dropped[0], drop_point, 0.1),
                  json.dumps([dragged, target, [s["position"] for s in shown["stickers"]], drop_point]))

            # Two fingers pinch and pan: the board point under their middle stays under it.
            touch = context.new_cdp_session(page2)
            zoom2 = zoom_of(page2)
            middle = to_board(page2, 500, 350)
            def fingers(kind, spread, rise):
                points = [] if kind == "touchEnd" else [{"x": 500 - spread, "y": 350 - rise, "id": 1}, {"x": 500 + spread, "y": 350 - rise, "id": 2}]
                touch.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": points})
            fingers("touchStart", 50, 0)
            for step in range(1, 6):
                fingers("touchMove", 50 + step * 10, step * 4)
            fingers("touchEnd", 0, 0)
            page2.wait_for_timeout(200)
            check("two fingers pinch (2x) and pan, the board point between them staying between them",
                  abs(zoom_of(page2) / zoom2 - 2) < 0.01 and near(to_board(page2, 500, 330), middle, 0.5)
                  and page2.locator('[data-kind="stroke"]').count() == 2,
                  f"{zoom2} -> {zoom_of(page2)}; {middle} -> {to_board(page2, 500, 330)}")

            # A page that loses its connection says so, reconnects and catches up.
            server.terminate()
            server.wait(timeout=10)
            check_within("a page shows that it lost its connection", lambda: page2.wait_for_selector("#status.down", timeout=20000))
            server = subprocess.Popen([BINARY, "serve", "--data", "data", "--listen", sync_address, "--web", web_address,
                                       "--web-token-file", "web-token"],
                                      cwd=work, stderr=subprocess.PIPE, text=True)
            wait_for_line(server, r"web view at http://([^/\s]+)/")
            drain(server)
            cli("move", "Cli.boardpkg", sticker, "--to", "320,200", cwd=work)
            cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
            def wait():
                page2.wait_for_selector("#status.live", timeout=15000)
                page2.wait_for_function(
                    "id => { const n = document.querySelector(`[data-id=\"${id}\"]`); return n && n.getAttribute('transform').startsWith('translate(320 200)'); }",
                    arg=sticker, timeout=20000)
            check_within("it reconnects and catches up with what changed meanwhile", wait)
            page1.wait_for_selector("#status.live", timeout=15000)

            # A page with a read token pans with any drag (and edits nothing).
            reader_server = subprocess.Popen([BINARY, "serve", "--data", "data2", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0",
                                              "--secret-file", "secret"], cwd=work, stderr=subprocess.PIPE, text=True)
            try:
                reader_sync = wait_for_line(reader_server, r"listening on (\S+)")
                reader_web = wait_for_line(reader_server, r"web view at http://([^/\s]+)/")
                drain(reader_server)
                # A peer token: the package carries the pages' operations as well as its own.
                writer = cli("token", "--secret-file", "secret", "--board", "watch", "--role", "peer", cwd=work).strip()
                reader = cli("token", "--secret-file", "secret", "--board", "watch", "--role", "read", cwd=work).strip()
                cli("sync", "Cli.boardpkg", "--server", reader_sync, "--board", "watch", "--token", writer, cwd=work)
                watcher = context.new_page()
                watcher.goto(f"http://{reader_web}/b/watch?token={reader}")
                watcher.wait_for_selector(f'[data-id="{sticker}"]', timeout=20000)
                watcher.wait_for_function("() => document.getElementById('mode').textContent === 'read-only view'", timeout=20000)
                start = paper(watcher)
                corner = to_screen(watcher, 0, 0)
                watcher.mouse.move(corner[0] + 50, corner[1] + 50)
                watcher.mouse.down()
                watcher.mouse.move(corner[0] + 90, corner[1] + 70, steps=5)
                watcher.mouse.up()
                moved = (paper(watcher)["x"] - start["x"], paper(watcher)["y"] - start["y"])
                check("a read-only page pans with a drag and draws nothing", near(moved, (40, 20), 0.5)
                      and watcher.locator('[data-kind="stroke"]').count() == 2, json.dumps(moved))
                # It may scrub the history, but has no restore, and the server refuses one it
                # sends anyway.
                watcher.click("#historyopen")
                watcher.wait_for_selector("#pastlabel:has-text('version')", timeout=20000)
                hidden = not watcher.locator("#restore").is_visible()
                watcher.evaluate("() => send({type: 'history-restore', version: 1})")
                def refused():
                    watcher.wait_for_function("() => document.getElementById('status').textContent.includes('may only read')", timeout=10000)
                check("a read-only page scrubs the history and shows no restore", hidden)
                check_within("a restore it sends anyway is refused by the server", refused)
                watcher.close()
            finally:
                reader_server.terminate()
                reader_server.wait(timeout=10)

            # A screenshot of the board beside the PNG export of the same board: close, not exact.
            cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
            cli("export", "Cli.boardpkg", "board.png", cwd=work)
            page1.mouse.move(0, 0)
            page1.evaluate("() => { const c = document.getElementById('cursors'); if (c) c.remove(); }")
            page1.click("#fit")
            shot = page1.screenshot(clip=paper(page1))
            with open(os.path.join(work, "board.png"), "rb") as f:
                exported = f.read()
            compare = context.new_page()
            difference = compare.evaluate("""async ([a, b]) => {
                const load = (src) => new Promise((resolve, reject) => { const i = new Image(); i.onload = () => resolve(i); i.onerror = reject; i.src = src; });
                const [x, y] = await Promise.all([load(a), load(b)]);
                const w = 240, h = 160;
                const pixels = (img) => { const c = document.createElement('canvas'); c.width = w; c.height = h;
                    const g = c.getContext('2d'); g.fillStyle = '#fff'; g.fillRect(0, 0, w, h); g.drawImage(img, 0, 0, w, h);
                    return g.getImageData(0, 0, w, h).data; };
                const p = pixels(x), q = pixels(y);
                let sum = 0; for (let i = 0; i < p.length; i += 4) sum += Math.abs(p[i] - q[i]) + Math.abs(p[i+1] - q[i+1]) + Math.abs(p[i+2] - q[i+2]);
                return { mean: sum / (w * h * 3), sizes: [x.width, x.height, y.width, y.height] };
            }""", ["data:image/png;base64," + base64.b64encode(shot).decode(), "data:image/png;base64," + base64.b64encode(exported).decode()])
            # And the comparison tells boards apart: the same board without its stroke and sticker
            # (a blank canvas) is far from the screenshot.
            blank = compare.evaluate("""async ([a]) => {
                const load = (src) => new Promise((resolve) => { const i = new Image(); i.onload = () => resolve(i); i.src = src; });
                const x = await load(a);
                const w = 240, h = 160;
                const c = document.createElement('canvas'); c.width = w; c.height = h;
                const g = c.getContext('2d'); g.fillStyle = '#fff'; g.fillRect(0, 0, w, h); g.drawImage(x, 0, 0, w, h);
                const p = g.getImageData(0, 0, w, h).data;
                let sum = 0; for (let i = 0; i < p.length; i += 4) sum += (255 - p[i]) + (255 - p[i+1]) + (255 - p[i+2]);
                return sum / (w * h * 3);
            }""", ["data:image/png;base64," + base64.b64encode(shot).decode()])
            print(f"       (mean difference per channel: export {difference['mean']:.3f}, blank canvas {blank:.3f})")
            check("the page's picture matches the PNG export closely", difference["mean"] < blank / 4, json.dumps(difference))

            # The time slider: the first version is the board as the CLI first synced it (the
            # sticker, no stroke yet), shown read-only; restoring it reaches page 2, and Undo in
            # the page that restored takes it back.
            scrub = context.new_page()
            scrub.on("dialog", lambda dialog: dialog.accept())
            scrub.goto(url)
            scrub.wait_for_selector("#status.live", timeout=20000)
            scrub.wait_for_selector('[data-kind="stroke"]', timeout=20000)
            scrub.click("#historyopen")
            scrub.wait_for_selector("#pastlabel:has-text('version')", timeout=20000)
            scrub.evaluate("() => { const s = document.getElementById('slider'); s.value = 0; s.dispatchEvent(new Event('input')); }")
            def first_version():
                scrub.wait_for_function("() => document.getElementById('pastlabel').textContent.startsWith('version 1 of')", timeout=10000)
                scrub.wait_for_function("() => document.querySelectorAll('[data-kind=\"stroke\"]').length === 0", timeout=10000)
            check_within("the slider's first version shows the board as it was (no stroke yet)", first_version)
            check("a past version is read-only (the tools are hidden)", not scrub.locator("#tools").is_visible()
                  and scrub.locator("#restore").is_visible())
            scrub.click("#restore")
            check_within("a restore reaches another page", lambda: page2.wait_for_function(
                "() => document.querySelectorAll('[data-kind=\"stroke\"]').length === 0", timeout=20000))
            scrub.click("#undo")
            check_within("Undo in the page that restored takes the restore back", lambda: page2.wait_for_selector('[data-kind="stroke"]', timeout=20000))
            browser.close()
    finally:
        if server:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    print(f"browser: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
