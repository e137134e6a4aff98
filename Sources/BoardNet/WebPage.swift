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

    /// The board as the page draws it: the canvas and background (`header`), each item's JSON
    /// by id, and the paint order, bottom to top.
    struct Rendered: Equatable {
        var header: String
        var items: [String: String]
        var order: [String]

        /// The whole board, one message.
        var json: String {
            "{\"type\":\"board\",\(header),\"items\":[\(order.compactMap { items[$0] }.joined(separator: ","))]}"
        }

        /// What changed since `old` as one message (items upserted, ids removed, and the paint
        /// order when it changed), or nil when nothing did. A new canvas or background sends the
        /// whole board instead.
        func changes(since old: Rendered) -> String? {
            guard header == old.header else { return json }
            let upserts = order.filter { items[$0] != old.items[$0] }.compactMap { items[$0] }
            let removals = old.order.filter { items[$0] == nil }
            let reordered = order != old.order
            guard !upserts.isEmpty || !removals.isEmpty || reordered else { return nil }
            var out = "{\"type\":\"changes\",\"upserts\":[\(upserts.joined(separator: ","))],"
            out += "\"removals\":[\(removals.map { "\"\($0)\"" }.joined(separator: ","))]"
            if reordered { out += ",\"order\":[\(order.map { "\"\($0)\"" }.joined(separator: ","))]" }
            return out + "}"
        }
    }

    static func render(_ board: BoardSnapshot) -> Rendered {
        var sizes: [String: (width: Int, height: Int)] = [:]
        return render(board, sizes: &sizes)
    }

    /// `sizes`: each image's pixel size by hash, read from its PNG header once and kept.
    static func render(_ board: BoardSnapshot, sizes: inout [String: (width: Int, height: Int)]) -> Rendered {
        var items: [String: String] = [:]
        for stroke in board.strokes {
            var points = ""
            points.reserveCapacity(stroke.points.count * 12)
            for (index, point) in stroke.points.enumerated() {
                if index > 0 { points += "," }
                points += number(point.x) + "," + number(point.y)
            }
            items[stroke.id.uuidString] = "{\"id\":\"\(stroke.id.uuidString)\",\"kind\":\"stroke\",\"color\":\"\(hex(stroke.color))\",\"width\":\(number(stroke.width)),\"points\":[\(points)]}"
        }
        for sticker in board.stickers {
            let hash = sticker.imageSHA256 ?? AssetHash.of(sticker.imagePNG).hex
            let size: (width: Int, height: Int)
            if let known = sizes[hash], !sticker.isPending {
                size = known
            } else {
                let header = try? PNGHeader(validating: sticker.imagePNG)
                size = header.map { (Int($0.width), Int($0.height)) } ?? (64, 64)
                if header != nil { sizes[hash] = size }
            }
            items[sticker.id.uuidString] = "{\"id\":\"\(sticker.id.uuidString)\",\"kind\":\"sticker\",\"asset\":\(json(hash)),"
                + "\"pending\":\(sticker.isPending),\"x\":\(number(sticker.position.x)),\"y\":\(number(sticker.position.y)),"
                + "\"scale\":\(number(sticker.scale)),\"rotation\":\(number(sticker.rotationRadians)),"
                + "\"w\":\(size.width),\"h\":\(size.height)}"
        }
        let order = (board.paintOrder ?? (board.strokes.map(\.id) + board.stickers.map(\.id))).map(\.uuidString).filter { items[$0] != nil }
        let background = board.backgroundSHA256.map(json) ?? "null"
        let header = "\"width\":\(number(board.canvasSize.width)),\"height\":\(number(board.canvasSize.height)),\"background\":\(background)"
        return Rendered(header: header, items: items, order: order)
    }

    /// The whole board as one message.
    static func boardJSON(_ board: BoardSnapshot) -> String {
        render(board).json
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

    /// The board list; `token` (the view's run token) is carried by every link.
    static func index(boards: [String], token: String?) -> (html: String, script: String) {
        let query = token.map { "?token=" + escapeHTML($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "") } ?? ""
        let list = boards.isEmpty
            ? "<p>No boards to list (with access control, open <code>/b/NAME?token=…</code> directly).</p>"
            : "<ul>" + boards.map { "<li><a href=\"/b/\(escapeHTML($0))\(query)\">\(escapeHTML($0))</a></li>" }.joined() + "</ul>"
        // The token leaves the address bar (and the history); the links keep it.
        let script = "history.replaceState(null, \"\", location.pathname);"
        let html = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>BoardSync boards</title>
        <style>body{font:16px system-ui,sans-serif;margin:2em;color:#222}a{color:#3355aa}</style></head>
        <body><h1>Boards</h1>\(list)<script>\(script)</script></body></html>
        """
        return (html, script)
    }

    /// The board page: draws the board in SVG from the WebSocket's JSON, redraws as it changes,
    /// shows others' pointers and ink in progress, sends this page's pointer, and reconnects
    /// (catching up with the whole board) when the connection drops. With a token that may
    /// write, it edits: draw strokes, add a PNG sticker (choose or drop a file), drag, scale and
    /// rotate stickers, delete, bring to front or back, undo and redo.
    static func board(name: String) -> (html: String, script: String) {
        let top = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>\(escapeHTML(name)) — BoardSync</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>
        html,body{margin:0;height:100%;font:14px system-ui,sans-serif;background:#eceef2}
        #bar{position:fixed;top:0;left:0;right:0;padding:6px 10px;background:#fff;border-bottom:1px solid #ccd;display:flex;gap:8px;align-items:center;z-index:2;flex-wrap:wrap}
        #status{padding:2px 8px;border-radius:10px;background:#ddd}
        #status.live{background:#c8f0c8}#status.down{background:#f6c8c8}
        #tools{display:none;gap:6px;align-items:center}
        #tools.on{display:flex}
        button{font:inherit;padding:2px 8px}
        button.active{background:#335;color:#fff}
        #stage{position:absolute;top:44px;left:0;right:0;bottom:0;overflow:auto}
        svg{background:#fff;box-shadow:0 1px 4px #0003;margin:16px;touch-action:none}
        .cursor text{font:12px system-ui,sans-serif}
        .selected{outline:2px dashed #3355aa}
        </style></head><body>
        <div id="bar"><b>\(escapeHTML(name))</b><span id="status">connecting…</span>
        <span id="tools">
          <button id="pen" class="active" title="Draw (P)">Pen</button><button id="hand" title="Select and drag (V)">Move</button>
          <input id="color" type="color" value="#224488" title="Ink colour"><input id="width" type="range" min="1" max="24" value="4" title="Ink width">
          <label><input id="file" type="file" accept="image/png" style="display:none"><button id="add" type="button">Sticker…</button></label>
          <button id="smaller" title="Smaller (-)">−</button><button id="bigger" title="Bigger (+)">+</button>
          <button id="left" title="Rotate left ([)">⟲</button><button id="right" title="Rotate right (])">⟳</button>
          <button id="front" title="Bring to front">Front</button><button id="back" title="Send to back">Back</button>
          <button id="delete" title="Delete (Del)">Delete</button>
          <button id="undo" title="Undo (Ctrl+Z)">Undo</button><button id="redo" title="Redo (Ctrl+Shift+Z)">Redo</button>
        </span>
        <span id="mode" style="color:#666">read-only view</span><span id="who" style="margin-left:auto"></span></div>
        <div id="stage"><svg id="board" xmlns="http://www.w3.org/2000/svg" width="800" height="600"></svg></div>
        <script>
        """
        // The script is served as it is hashed: the policy allows exactly these bytes.
        let script = """
        "use strict";
        const boardName = \(json(name));
        // The token leaves the address bar (and so the history) once read; the tab keeps it
        // for reloads.
        const tokenKey = "boardsync-token:" + boardName;
        let token = new URLSearchParams(location.search).get("token");
        if (token) {
          try { sessionStorage.setItem(tokenKey, token); } catch (e) {}
          history.replaceState(null, "", location.pathname + location.hash);
        } else {
          try { token = sessionStorage.getItem(tokenKey); } catch (e) {}
        }
        const query = token ? "?token=" + encodeURIComponent(token) : "";
        const svg = document.getElementById("board");
        const $ = (id) => document.getElementById(id);
        const NS = "http://www.w3.org/2000/svg";
        const others = new Map();
        let socket = null, delay = 250, lastSent = 0, canEdit = false, tool = "pen";
        let board = {width: 800, height: 600, items: []};
        let selected = null, ink = null, drag = null;
        function el(name, attrs) {
          const node = document.createElementNS(NS, name);
          for (const key in attrs) node.setAttribute(key, attrs[key]);
          return node;
        }
        function send(message) {
          if (socket && socket.readyState === 1) { socket.send(JSON.stringify(message)); return true; }
          return false;
        }
        function status(text, kind) { $("status").textContent = text; $("status").className = kind || ""; }
        function assetURL(hash) { return "/b/" + encodeURIComponent(boardName) + "/asset/" + hash + query; }
        function polyline(points, color, width, alpha) {
          const pts = [];
          for (let i = 0; i + 1 < points.length; i += 2) pts.push(points[i] + "," + points[i + 1]);
          return el("polyline", {points: pts.join(" "), fill: "none", stroke: color, "stroke-opacity": alpha,
            "stroke-width": width, "stroke-linecap": "round", "stroke-linejoin": "round"});
        }
        function stickerTransform(item) {
          return "translate(" + item.x + " " + item.y + ") rotate(" + (item.rotation * 180 / Math.PI) + ")";
        }
        function draw() {
          svg.setAttribute("width", board.width);
          svg.setAttribute("height", board.height);
          svg.setAttribute("viewBox", "0 0 " + board.width + " " + board.height);
          const layer = el("g", {id: "items"});
          if (board.background) {
            layer.appendChild(el("image", {href: assetURL(board.background), x: 0, y: 0, width: board.width, height: board.height, preserveAspectRatio: "none"}));
          }
          for (const item of board.items) {
            let node;
            if (item.kind === "stroke") {
              node = polyline(item.points, item.color.slice(0, 7), item.width, parseInt(item.color.slice(7, 9), 16) / 255);
            } else {
              const w = item.w * item.scale, h = item.h * item.scale;
              node = el("g", {transform: stickerTransform(item)});
              node.appendChild(item.pending
                ? el("rect", {x: -w / 2, y: -h / 2, width: w, height: h, fill: "#eee", stroke: "#bbb", "stroke-dasharray": "4 3"})
                : el("image", {href: assetURL(item.asset), x: -w / 2, y: -h / 2, width: w, height: h}));
            }
            node.setAttribute("data-id", item.id);
            node.setAttribute("data-kind", item.kind);
            if (selected === item.id) node.setAttribute("class", "selected");
            layer.appendChild(node);
          }
          const old = $("items");
          if (old) svg.replaceChild(layer, old); else svg.insertBefore(layer, svg.firstChild);
          drawOthers();
        }
        function drawOthers() {
          const old = $("cursors");
          const layer = el("g", {id: "cursors", "pointer-events": "none"});
          const now = Date.now();
          const names = [];
          for (const [id, p] of others) {
            if (p.expires < now) { others.delete(id); continue; }
            names.push(p.name);
            if (p.ink && p.ink.length >= 4) layer.appendChild(polyline(p.ink, p.color, 3, 0.6));
            if (p.x !== undefined) {
              const g = el("g", {class: "cursor", transform: "translate(" + p.x + " " + p.y + ")"});
              g.appendChild(el("path", {d: "M0 0 L0 16 L4 12 L8 20 L10 19 L6 11 L12 11 Z", fill: p.color, stroke: "#fff"}));
              const label = el("text", {x: 12, y: 24, fill: p.color});
              label.textContent = p.name;
              g.appendChild(label);
              layer.appendChild(g);
            }
          }
          if (ink && ink.points.length >= 2) layer.appendChild(polyline(ink.points, ink.color, ink.width, 1));
          if (old) svg.replaceChild(layer, old); else svg.appendChild(layer);
          $("who").textContent = names.length ? "on the board: " + names.join(", ") : "";
        }
        function boardPoint(event) {
          const box = svg.getBoundingClientRect();
          const scale = board.width / box.width;
          return [Math.round((event.clientX - box.left) * scale * 16) / 16, Math.round((event.clientY - box.top) * scale * 16) / 16];
        }
        function itemAt(event) {
          let node = event.target;
          while (node && node !== svg) {
            if (node.getAttribute && node.getAttribute("data-id")) return node;
            node = node.parentNode;
          }
          return null;
        }
        function setTool(name) {
          tool = name;
          $("pen").className = name === "pen" ? "active" : "";
          $("hand").className = name === "hand" ? "active" : "";
        }
        function selectedItem() { return board.items.find((item) => item.id === selected); }
        svg.addEventListener("pointerdown", (event) => {
          if (!canEdit) return;
          const [x, y] = boardPoint(event);
          if (tool === "pen") {
            ink = {points: [x, y], color: $("color").value, width: Number($("width").value)};
            svg.setPointerCapture(event.pointerId);
          } else {
            const node = itemAt(event);
            selected = node ? node.getAttribute("data-id") : null;
            draw();
            const item = selectedItem();
            if (item && item.kind === "sticker") {
              drag = {item: item, from: [x, y], start: [item.x, item.y], node: node, sent: 0};
              send({type: "begin-group"});
              svg.setPointerCapture(event.pointerId);
            }
          }
        });
        svg.addEventListener("pointermove", (event) => {
          const [x, y] = boardPoint(event);
          const now = Date.now();
          if (ink) { ink.points.push(x, y); drawOthers(); }
          if (drag) {
            drag.item.x = drag.start[0] + x - drag.from[0];
            drag.item.y = drag.start[1] + y - drag.from[1];
            drag.node.setAttribute("transform", stickerTransform(drag.item));
            if (now - drag.sent > 30) { drag.sent = now; send({type: "move", id: drag.item.id, x: drag.item.x, y: drag.item.y}); }
          }
          if (now - lastSent < 50) return;
          lastSent = now;
          const message = {type: "pointer", x: x, y: y};
          if (ink) { message.ink = ink.points.slice(-4000); message.color = ink.color; message.width = ink.width; }
          send(message);
        });
        function finish() {
          if (ink) {
            if (ink.points.length >= 2) send({type: "stroke", points: ink.points, color: ink.color, width: ink.width});
            ink = null;
            drawOthers();
          }
          if (drag) {
            send({type: "move", id: drag.item.id, x: drag.item.x, y: drag.item.y});
            send({type: "end-group"});
            drag = null;
          }
        }
        svg.addEventListener("pointerup", finish);
        svg.addEventListener("pointercancel", finish);
        function transform(scaleBy, rotateBy) {
          const item = selectedItem();
          if (!item || item.kind !== "sticker") return;
          send({type: "transform", id: item.id, scale: item.scale * scaleBy, rotation: item.rotation + rotateBy});
        }
        function addSticker(file, x, y) {
          if (!file || file.type !== "image/png") { status("only PNG images can be stickers", "down"); return; }
          const reader = new FileReader();
          reader.onload = () => {
            const base64 = String(reader.result).split(",")[1];
            send({type: "sticker", png: base64, x: x === undefined ? board.width / 2 : x, y: y === undefined ? board.height / 2 : y});
          };
          reader.readAsDataURL(file);
        }
        $("pen").onclick = () => setTool("pen");
        $("hand").onclick = () => setTool("hand");
        $("add").onclick = () => $("file").click();
        $("file").onchange = () => { addSticker($("file").files[0]); $("file").value = ""; };
        $("smaller").onclick = () => transform(1 / 1.25, 0);
        $("bigger").onclick = () => transform(1.25, 0);
        $("left").onclick = () => transform(1, -Math.PI / 12);
        $("right").onclick = () => transform(1, Math.PI / 12);
        $("front").onclick = () => { if (selected) send({type: "front", id: selected}); };
        $("back").onclick = () => { if (selected) send({type: "back", id: selected}); };
        $("delete").onclick = () => { if (selected) { send({type: "delete", id: selected}); selected = null; } };
        $("undo").onclick = () => send({type: "undo"});
        $("redo").onclick = () => send({type: "redo"});
        svg.addEventListener("dragover", (event) => { if (canEdit) event.preventDefault(); });
        svg.addEventListener("drop", (event) => {
          if (!canEdit) return;
          event.preventDefault();
          const [x, y] = boardPoint(event);
          addSticker(event.dataTransfer.files[0], x, y);
        });
        document.addEventListener("keydown", (event) => {
          if (!canEdit || event.target.tagName === "INPUT") return;
          const key = event.key;
          if ((event.ctrlKey || event.metaKey) && key.toLowerCase() === "z") { send({type: event.shiftKey ? "redo" : "undo"}); event.preventDefault(); }
          else if (key === "Delete" || key === "Backspace") $("delete").onclick();
          else if (key === "+" || key === "=") transform(1.25, 0);
          else if (key === "-") transform(1 / 1.25, 0);
          else if (key === "[") transform(1, -Math.PI / 12);
          else if (key === "]") transform(1, Math.PI / 12);
          else if (key === "p") setTool("pen");
          else if (key === "v") setTool("hand");
        });
        function connect() {
          const scheme = location.protocol === "https:" ? "wss://" : "ws://";
          socket = new WebSocket(scheme + location.host + "/ws/" + encodeURIComponent(boardName) + query);
          socket.onopen = () => { status("live", "live"); delay = 250; };
          socket.onmessage = (event) => {
            const message = JSON.parse(event.data);
            if (message.type === "board") { board = message; if (!drag) draw(); }
            else if (message.type === "changes") {
              const byId = new Map(board.items.map((item) => [item.id, item]));
              for (const id of message.removals) byId.delete(id);
              for (const item of message.upserts) byId.set(item.id, item);
              const order = message.order || board.items.map((item) => item.id).filter((id) => byId.has(id))
                .concat(message.upserts.map((item) => item.id).filter((id) => !board.items.some((old) => old.id === id)));
              board.items = order.map((id) => byId.get(id)).filter((item) => item);
              if (!drag) draw();
            }
            else if (message.type === "welcome") {
              canEdit = message.canEdit;
              $("tools").className = canEdit ? "on" : "";
              $("mode").textContent = canEdit ? "you are " + message.name : "read-only view";
            } else if (message.type === "error") status(message.message, "down");
            else if (message.type === "presence") {
              if (message.gone) others.delete(message.replica);
              else { message.expires = Date.now() + message.ttl * 1000; others.set(message.replica, message); }
              drawOthers();
            }
          };
          socket.onclose = () => {
            status("disconnected — reconnecting…", "down");
            setTimeout(connect, delay);
            delay = Math.min(delay * 2, 5000);
          };
        }
        setInterval(drawOthers, 1000);
        connect();
        """
        return (top + script + "</script></body></html>", script)
    }
}
