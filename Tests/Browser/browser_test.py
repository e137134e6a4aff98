#!/usr/bin/env python3
"""The web view in a real browser: Debian's Chromium driven by Playwright (nothing downloaded).

Usage: browser_test.py BOARD_SYNC_BINARY [CHROMIUM]

Starts `board-sync serve --web` on free loopback ports with a board made by the CLI, opens two
pages on it and checks, in order: a stroke drawn with the mouse in page 1 appears in page 2; a
sticker dragged in page 2 moves in page 1; a PNG chosen in page 1 becomes a sticker in page 2; a CLI replica syncing through the server sees both
edits, and its own move appears in both pages; page 1's cursor is visible in page 2; with the
server stopped a page says it is disconnected, and once it is back the page reconnects and
catches up; a screenshot of the board matches the CLI's PNG export of the same board closely
(not bit for bit). Prints one line per check and "browser: N passed, M failed"; exits 1 on any failure.
"""
import base64, json, os, re, shutil, struct, subprocess, sys, tempfile, time, zlib

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

            # A stroke drawn with the mouse in page 1 appears in page 2.
            box = page1.locator("svg#board").bounding_box()
            page1.mouse.move(box["x"] + 200, box["y"] + 200)
            page1.mouse.down()
            for step in range(1, 12):
                page1.mouse.move(box["x"] + 200 + step * 12, box["y"] + 200 + step * 5)
            page1.mouse.up()
            check_within("a stroke drawn in page 1 appears in page 2", lambda: page2.wait_for_selector('[data-kind="stroke"]', timeout=20000))

            # A sticker dragged in page 2 moves in page 1.
            page2.click("#hand")
            box2 = page2.locator("svg#board").bounding_box()
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

            # A page that loses its connection says so, reconnects and catches up.
            server.terminate()
            server.wait(timeout=10)
            check_within("a page shows that it lost its connection", lambda: page2.wait_for_selector("#status.down", timeout=20000))
            server = subprocess.Popen([BINARY, "serve", "--data", "data", "--listen", sync_address, "--web", web_address,
                                       "--web-token-file", "web-token"],
                                      cwd=work, stderr=subprocess.PIPE, text=True)
            wait_for_line(server, r"web view at http://([^/\s]+)/")
            cli("move", "Cli.boardpkg", sticker, "--to", "320,200", cwd=work)
            cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
            def wait():
                page2.wait_for_selector("#status.live", timeout=15000)
                page2.wait_for_function(
                    "id => { const n = document.querySelector(`[data-id=\"${id}\"]`); return n && n.getAttribute('transform').startsWith('translate(320 200)'); }",
                    arg=sticker, timeout=20000)
            check_within("it reconnects and catches up with what changed meanwhile", wait)
            page1.wait_for_selector("#status.live", timeout=15000)

            # A screenshot of the board beside the PNG export of the same board: close, not exact.
            cli("sync", "Cli.boardpkg", "--server", sync_address, "--board", "demo", cwd=work)
            cli("export", "Cli.boardpkg", "board.png", cwd=work)
            page1.mouse.move(0, 0)
            page1.evaluate("() => { const c = document.getElementById('cursors'); if (c) c.remove(); }")
            shot = page1.locator("svg#board").screenshot()
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
