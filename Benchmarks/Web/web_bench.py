#!/usr/bin/env python3
"""Figures for the web view (`bin/bench --web`): edit in one page to pixels in another, presence
fan-out to 50 pages of one board, and server memory per connected page; with BOARD_BENCH (the
release board-bench, as bin/bench --web passes it), the same on the 82,400-operation workload
board: memory per watching and per editing page, and an edit in one page reaching another.

Usage: web_bench.py BOARD_SYNC_BINARY [--json]

Starts `board-sync serve --web` (the release binary) on free loopback ports, without a secret:
pages present the token the server mints and logs (`web view at http://ADDR/?token=T`), and
`--web-pages-per-address` lets all 50 pages come from 127.0.0.1 (the default allows 32). Watching
pages are plain WebSocket clients written here (what a page costs the server does not depend on the
browser); edit-to-pixels uses Debian's Chromium through Playwright and is skipped, saying so,
when either is missing.
"""
import base64, json, os, re, shutil, socket, statistics, struct, subprocess, sys, tempfile, time, zlib

BINARY = os.path.abspath(sys.argv[1])
WORKLOAD_TOOL = os.environ.get("BOARD_BENCH")
AS_JSON = "--json" in sys.argv


def png(width, height, rgb):
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def cli(*args, cwd):
    subprocess.run([BINARY, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Page:
    """A WebSocket client of the web view (a page without a browser)."""

    def __init__(self, address, board, token):
        host, port = address.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /ws/{board}?token={token} HTTP/1.1\r\nHost: {address}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        # The board's strokes as this page knows them: the whole board on join, then changes.
        self.strokes = set()

    def send(self, obj):
        payload = json.dumps(obj).encode()
        mask = os.urandom(4)
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def message(self, timeout=10):
        deadline = time.time() + timeout
        while True:
            if len(self.buffer) >= 2:
                length, offset = self.buffer[1] & 0x7F, 2
                if length == 126 and len(self.buffer) >= 4:
                    length, offset = struct.unpack(">H", self.buffer[2:4])[0], 4
                elif length == 127 and len(self.buffer) >= 10:
                    length, offset = struct.unpack(">Q", self.buffer[2:10])[0], 10
                if length < 126 or offset > 2:
                    if len(self.buffer) >= offset + length:
                        payload = self.buffer[offset:offset + length]
                        opcode = self.buffer[0] & 0x0F
                        self.buffer = self.buffer[offset + length:]
                        if opcode == 1:
                            return self.note(json.loads(payload))
                        continue
            remaining = deadline - time.time()
            if remaining <= 0:
                raise TimeoutError("no message")
            self.sock.settimeout(remaining)
            self.buffer += self.sock.recv(1 << 20)

    def note(self, message):
        if message["type"] == "board":
            self.strokes = {item["id"] for item in message["items"] if item["kind"] == "stroke"}
        elif message["type"] == "changes":
            self.strokes |= {item["id"] for item in message["upserts"] if item["kind"] == "stroke"}
            self.strokes -= set(message["removals"])
        return message

    def wait_for(self, predicate, timeout=10):
        deadline = time.time() + timeout
        while True:
            message = self.message(max(0.01, deadline - time.time()))
            if predicate(message):
                return message


def workload_figures(server, web_address, token, figures, pages_count=10):
    """Pages on the workload board: the server's memory per watching and per editing page, and an
    edit in one page reaching another (WebSocket clients: the server's side of edit to pixels)."""
    time.sleep(0.5)
    base = rss_kb(server.pid)
    pages = []
    for _ in range(pages_count):
        page = Page(web_address, "workload", token)
        page.wait_for(lambda m: m["type"] == "board", timeout=180)
        pages.append(page)
    time.sleep(0.5)
    watching = rss_kb(server.pid)
    count = len(pages[0].strokes)
    for index, page in enumerate(pages):
        page.send({"type": "stroke", "points": [10, 10 + index, 60, 40 + index], "color": "#223344", "width": 2})
    for page in pages:
        page.wait_for(lambda m, p=page: len(p.strokes) >= count + pages_count, timeout=60)
    time.sleep(0.5)
    editing = rss_kb(server.pid)
    figures["workload_memory_per_watching_page_kb"] = round((watching - base) / pages_count, 1)
    figures["workload_memory_per_editing_page_kb"] = round((editing - watching) / pages_count, 1)
    sender, receiver = pages[0], pages[1]
    for page in pages[2:]:
        page.sock.close()
    samples = []
    for index in range(30):
        before = len(receiver.strokes)
        start = time.perf_counter()
        sender.send({"type": "stroke", "points": [300, 100 + index, 340, 110 + index], "color": "#223344", "width": 2})
        receiver.wait_for(lambda m: len(receiver.strokes) > before, timeout=30)
        samples.append((time.perf_counter() - start) * 1000)
        time.sleep(0.15)  # past the renders' coalescing (20 ms): each edit is its own update
    figures["workload_edit_to_other_page_ms_p50"] = round(percentile(samples, 50), 1)
    figures["workload_edit_to_other_page_ms_p99"] = round(percentile(samples, 99), 1)
    for page in pages[:2]:
        page.sock.close()


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    work = tempfile.mkdtemp(prefix="boardsync-webbench-")
    figures = {}
    server = None
    try:
        with open(os.path.join(work, "red.png"), "wb") as f:
            f.write(png(40, 40, (220, 30, 30)))
        cli("new", "B.boardpkg", "--canvas", "800x600", cwd=work)
        cli("sticker", "B.boardpkg", "--image", "red.png", "--at", "100,100", cwd=work)
        if WORKLOAD_TOOL:
            os.makedirs(os.path.join(work, "data"), exist_ok=True)
            subprocess.run([WORKLOAD_TOOL, "--write-workload", os.path.join(work, "data", "workload.boardpkg")],
                           check=True, capture_output=True, timeout=600)
        server = subprocess.Popen([BINARY, "serve", "--data", "data", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0",
                                   "--web-pages-per-address", "64"],
                                  cwd=work, stderr=subprocess.PIPE, text=True)
        sync_address = web_address = token = None
        while not (sync_address and web_address):
            line = server.stderr.readline()
            if not line:
                raise RuntimeError("the server ended before it said where it listens")
            match = re.search(r"listening on (\S+)", line) or None
            if match: sync_address = match.group(1)
            match = re.search(r"web view at http://([^/\s]+)/\?token=(\S+)", line)
            if match: web_address, token = match.group(1), match.group(2)
        cli("sync", "B.boardpkg", "--server", sync_address, "--board", "bench", cwd=work)
        # Keep reading the server's log so it never blocks on a full pipe.
        import threading
        threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()

        # Memory per watching page, then per editing page (each edits as a replica of its own).
        time.sleep(0.3)
        before = rss_kb(server.pid)
        pages = []
        for _ in range(50):
            page = Page(web_address, "bench", token)
            page.wait_for(lambda m: m["type"] == "board")
            pages.append(page)
        time.sleep(0.3)
        watching = rss_kb(server.pid)
        figures["memory_per_watching_page_kb"] = round((watching - before) / 50, 1)
        for index, page in enumerate(pages[:20]):
            page.send({"type": "stroke", "points": [10, 10 + index, 60, 40 + index], "color": "#223344", "width": 2})
        for page in pages[:20]:
            if len(page.strokes) < 20:
                page.wait_for(lambda m: len(page.strokes) >= 20)
        time.sleep(0.3)
        editing = rss_kb(server.pid)
        figures["memory_per_editing_page_kb"] = round((editing - watching) / 20, 1)

        # Presence fan-out: one page's pointer to the other 49 pages.
        sender, receivers = pages[0], pages[1:]
        fanout = []
        for round_index in range(20):
            x = 100 + round_index
            start = time.perf_counter()
            sender.send({"type": "pointer", "x": x, "y": 50})
            arrivals = []
            for page in receivers:
                page.wait_for(lambda m: m["type"] == "presence" and m.get("x") == x)
                arrivals.append(time.perf_counter() - start)
            fanout.append(max(arrivals) * 1000)
            time.sleep(0.06)
        figures["presence_fanout_50_pages_ms_p50"] = round(percentile(fanout, 50), 2)
        figures["presence_fanout_50_pages_ms_p99"] = round(percentile(fanout, 99), 2)
        for page in pages:
            page.sock.close()

        if WORKLOAD_TOOL:
            workload_figures(server, web_address, token, figures)
        else:
            print("web_bench: SKIPPED the workload board: BOARD_BENCH (board-bench) not given", file=sys.stderr)

        # Edit in one page to pixels in another (Chromium), when it is here.
        chromium = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            sync_playwright = None
        if chromium and sync_playwright:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
                context = browser.new_context(viewport={"width": 1000, "height": 800})
                one, two = context.new_page(), context.new_page()
                for page in (one, two):
                    page.goto(f"http://{web_address}/b/bench?token={token}")
                    page.wait_for_selector("#status.live")
                box = one.locator("svg#board").bounding_box()
                samples = []
                for index in range(30):
                    count = two.evaluate("() => document.querySelectorAll('[data-kind=stroke]').length")
                    one.mouse.move(box["x"] + 300, box["y"] + 100 + index * 5)
                    one.mouse.down()
                    one.mouse.move(box["x"] + 340, box["y"] + 110 + index * 5)
                    start = time.perf_counter()
                    one.mouse.up()
                    two.wait_for_function("n => document.querySelectorAll('[data-kind=stroke]').length > n", arg=count,
                                          polling="raf", timeout=10000)
                    samples.append((time.perf_counter() - start) * 1000)
                figures["edit_to_pixels_ms_p50"] = round(percentile(samples, 50), 1)
                figures["edit_to_pixels_ms_p99"] = round(percentile(samples, 99), 1)
                browser.close()
        else:
            print("web_bench: SKIPPED edit-to-pixels: needs Debian's chromium and Python's playwright", file=sys.stderr)
    finally:
        if server:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)
    if AS_JSON:
        print(json.dumps(figures, indent=2))
    else:
        print("BoardSync web view (serve --web, loopback, release)")
        for key, value in figures.items():
            print(f"  {key:40} {value}")


if __name__ == "__main__":
    main()
