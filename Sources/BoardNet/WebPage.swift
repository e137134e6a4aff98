import BoardCRDT
import BoardModel
import BoardSync
import Foundation

/// The web view's pages (embedded: no build step, no CDN, works offline) and the JSON it sends.
enum WebPage {
    static func escapeHTML(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "'", with: "&#39;")
    }

    /// A JSON string literal.
    static func json(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<": out += "\\u003c"  // never "</script>" in a page
            default:
                if scalar.value < 0x20 { out += String(format: "\\u%04x", scalar.value) } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out + "\""
    }

    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    static func hex(_ color: RGBAColor) -> String {
        let c = Color8(color) ?? .black
        return String(format: "#%02x%02x%02x%02x", c.red, c.green, c.blue, c.alpha)
    }

    /// The board as the page draws it, bottom to top.
    static func boardJSON(_ board: BoardSnapshot) -> String {
        var items: [UUID: String] = [:]
        for stroke in board.strokes {
            var points = ""
            points.reserveCapacity(stroke.points.count * 12)
            for (index, point) in stroke.points.enumerated() {
                if index > 0 { points += "," }
                points += number(point.x) + "," + number(point.y)
            }
            items[stroke.id] = "{\"id\":\"\(stroke.id.uuidString)\",\"kind\":\"stroke\",\"color\":\"\(hex(stroke.color))\",\"width\":\(number(stroke.width)),\"points\":[\(points)]}"
        }
        for sticker in board.stickers {
            let header = try? PNGHeader(validating: sticker.imagePNG)
            let hash = sticker.imageSHA256 ?? AssetHash.of(sticker.imagePNG).hex
            items[sticker.id] = "{\"id\":\"\(sticker.id.uuidString)\",\"kind\":\"sticker\",\"asset\":\(json(hash)),"
                + "\"pending\":\(sticker.isPending),\"x\":\(number(sticker.position.x)),\"y\":\(number(sticker.position.y)),"
                + "\"scale\":\(number(sticker.scale)),\"rotation\":\(number(sticker.rotationRadians)),"
                + "\"w\":\(header.map { Int($0.width) } ?? 64),\"h\":\(header.map { Int($0.height) } ?? 64)}"
        }
        let order = board.paintOrder ?? (board.strokes.map(\.id) + board.stickers.map(\.id))
        let listed = order.compactMap { items[$0] }
        let background = board.backgroundSHA256.map(json) ?? "null"
        return "{\"type\":\"board\",\"width\":\(number(board.canvasSize.width)),\"height\":\(number(board.canvasSize.height)),"
            + "\"background\":\(background),\"items\":[\(listed.joined(separator: ","))]}"
    }

    static func presenceJSON(_ presence: Presence) -> String {
        let color = String(format: "#%02x%02x%02x", presence.color.red, presence.color.green, presence.color.blue)
        let pointer = presence.pointer.map { ",\"x\":\(number(FixedPoint.points($0.x))),\"y\":\(number(FixedPoint.points($0.y)))" } ?? ""
        let ink = presence.stroke.map { stroke in
            ",\"ink\":[" + stroke.points.map { "\(number(FixedPoint.points($0.x))),\(number(FixedPoint.points($0.y)))" }.joined(separator: ",") + "]"
        } ?? ""
        return "{\"type\":\"presence\",\"replica\":\"\(presence.replica)\",\"name\":\(json(presence.name)),\"color\":\"\(color)\","
            + "\"gone\":\(presence.isGone),\"ttl\":\(number(presence.ttl))\(pointer)\(ink)}"
    }

    static func index(boards: [String]) -> String {
        let list = boards.isEmpty
            ? "<p>No boards to list (with access control, open <code>/b/NAME?token=…</code> directly).</p>"
            : "<ul>" + boards.map { "<li><a href=\"/b/\(escapeHTML($0))\">\(escapeHTML($0))</a></li>" }.joined() + "</ul>"
        return """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>BoardSync boards</title>
        <style>body{font:16px system-ui,sans-serif;margin:2em;color:#222}a{color:#3355aa}</style></head>
        <body><h1>Boards</h1>\(list)</body></html>
        """
    }

    /// The board page: draws the board in SVG from the WebSocket's JSON, redraws as it changes,
    /// shows others' pointers and ink in progress, sends this page's pointer, and reconnects
    /// (catching up with the whole board) when the connection drops.
    static func board(name: String) -> String {
        """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>\(escapeHTML(name)) — BoardSync</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>
        html,body{margin:0;height:100%;font:14px system-ui,sans-serif;background:#eceef2}
        #bar{position:fixed;top:0;left:0;right:0;padding:6px 10px;background:#fff;border-bottom:1px solid #ccd;display:flex;gap:12px;align-items:center;z-index:2}
        #status{padding:2px 8px;border-radius:10px;background:#ddd}
        #status.live{background:#c8f0c8}#status.down{background:#f6c8c8}
        #stage{position:absolute;top:38px;left:0;right:0;bottom:0;overflow:auto}
        svg{background:#fff;box-shadow:0 1px 4px #0003;margin:16px}
        .cursor text{font:12px system-ui,sans-serif}
        </style></head><body>
        <div id="bar"><b>\(escapeHTML(name))</b><span id="status">connecting…</span><span id="who"></span>
        <span style="margin-left:auto;color:#666">read-only view</span></div>
        <div id="stage"><svg id="board" xmlns="http://www.w3.org/2000/svg" width="800" height="600"></svg></div>
        <script>
        "use strict";
        const boardName = \(json(name));
        const token = new URLSearchParams(location.search).get("token");
        const query = token ? "?token=" + encodeURIComponent(token) : "";
        const svg = document.getElementById("board");
        const statusEl = document.getElementById("status");
        const whoEl = document.getElementById("who");
        const NS = "http://www.w3.org/2000/svg";
        const others = new Map();
        let socket = null, delay = 250, lastSent = 0;
        function el(name, attrs) {
          const node = document.createElementNS(NS, name);
          for (const key in attrs) node.setAttribute(key, attrs[key]);
          return node;
        }
        function draw(board) {
          svg.setAttribute("width", board.width);
          svg.setAttribute("height", board.height);
          svg.setAttribute("viewBox", "0 0 " + board.width + " " + board.height);
          const layer = el("g", {id: "items"});
          if (board.background) {
            layer.appendChild(el("image", {href: "/b/" + encodeURIComponent(boardName) + "/asset/" + board.background + query,
              x: 0, y: 0, width: board.width, height: board.height, preserveAspectRatio: "none"}));
          }
          for (const item of board.items) {
            if (item.kind === "stroke") {
              const pts = [];
              for (let i = 0; i + 1 < item.points.length; i += 2) pts.push(item.points[i] + "," + item.points[i + 1]);
              const color = item.color.slice(0, 7), alpha = parseInt(item.color.slice(7, 9), 16) / 255;
              layer.appendChild(el("polyline", {points: pts.join(" "), fill: "none", stroke: color, "stroke-opacity": alpha,
                "stroke-width": item.width, "stroke-linecap": "round", "stroke-linejoin": "round", "data-id": item.id}));
            } else {
              const w = item.w * item.scale, h = item.h * item.scale;
              const deg = item.rotation * 180 / Math.PI;
              const g = el("g", {transform: "translate(" + item.x + " " + item.y + ") rotate(" + deg + ")", "data-id": item.id});
              if (item.pending) {
                g.appendChild(el("rect", {x: -w / 2, y: -h / 2, width: w, height: h, fill: "#eee", stroke: "#bbb", "stroke-dasharray": "4 3"}));
              } else {
                g.appendChild(el("image", {href: "/b/" + encodeURIComponent(boardName) + "/asset/" + item.asset + query,
                  x: -w / 2, y: -h / 2, width: w, height: h}));
              }
              layer.appendChild(g);
            }
          }
          const old = document.getElementById("items");
          if (old) svg.replaceChild(layer, old); else svg.insertBefore(layer, svg.firstChild);
          drawOthers();
        }
        function drawOthers() {
          const old = document.getElementById("cursors");
          const layer = el("g", {id: "cursors"});
          const now = Date.now();
          const names = [];
          for (const [id, p] of others) {
            if (p.expires < now) { others.delete(id); continue; }
            names.push(p.name);
            if (p.ink && p.ink.length >= 4) {
              const pts = [];
              for (let i = 0; i + 1 < p.ink.length; i += 2) pts.push(p.ink[i] + "," + p.ink[i + 1]);
              layer.appendChild(el("polyline", {points: pts.join(" "), fill: "none", stroke: p.color, "stroke-width": 3, "stroke-opacity": 0.6}));
            }
            if (p.x !== undefined) {
              const g = el("g", {class: "cursor", transform: "translate(" + p.x + " " + p.y + ")"});
              g.appendChild(el("path", {d: "M0 0 L0 16 L4 12 L8 20 L10 19 L6 11 L12 11 Z", fill: p.color, stroke: "#fff"}));
              const label = el("text", {x: 12, y: 24, fill: p.color});
              label.textContent = p.name;
              g.appendChild(label);
              layer.appendChild(g);
            }
          }
          if (old) svg.replaceChild(layer, old); else svg.appendChild(layer);
          whoEl.textContent = names.length ? "on the board: " + names.join(", ") : "";
        }
        function connect() {
          const scheme = location.protocol === "https:" ? "wss://" : "ws://";
          socket = new WebSocket(scheme + location.host + "/ws/" + encodeURIComponent(boardName) + query);
          socket.onopen = () => { statusEl.textContent = "live"; statusEl.className = "live"; delay = 250; };
          socket.onmessage = (event) => {
            const message = JSON.parse(event.data);
            if (message.type === "board") draw(message);
            else if (message.type === "presence") {
              if (message.gone) others.delete(message.replica);
              else { message.expires = Date.now() + message.ttl * 1000; others.set(message.replica, message); }
              drawOthers();
            }
          };
          socket.onclose = () => {
            statusEl.textContent = "disconnected — reconnecting…"; statusEl.className = "down";
            setTimeout(connect, delay);
            delay = Math.min(delay * 2, 5000);
          };
        }
        svg.addEventListener("pointermove", (event) => {
          const now = Date.now();
          if (!socket || socket.readyState !== 1 || now - lastSent < 50) return;
          lastSent = now;
          const box = svg.getBoundingClientRect();
          const scale = svg.viewBox.baseVal && svg.viewBox.baseVal.width ? svg.viewBox.baseVal.width / box.width : 1;
          socket.send(JSON.stringify({type: "pointer", x: (event.clientX - box.left) * scale, y: (event.clientY - box.top) * scale}));
        });
        setInterval(drawOthers, 1000);
        connect();
        </script></body></html>
        """
    }
}
