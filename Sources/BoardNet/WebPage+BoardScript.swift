extension WebPage {
    /// The board page's script before the view's part (`viewScript`): the connection's state
    /// and drawing the board and others' pointers in board points inside `#view`.
    static func boardScriptStart(name: String) -> String {
        """
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
        const $ = (id) => document.getElementById(id);
        const svg = $("board"), stage = $("stage"), viewLayer = $("view");
        const NS = "http://www.w3.org/2000/svg";
        const others = new Map();
        let socket = null, delay = 250, lastSent = 0, canEdit = false, tool = "pen";
        let board = {width: 800, height: 600, items: []};
        // The time slider: the versions the server listed, and the past board shown (null: live).
        let versions = [], past = null, pastVersion = 0, scrubSent = 0, scrubTimer = null;
        // Named versions: the labels' texts by the number of the version each names.
        let labelsByVersion = new Map();
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
        // Items are drawn in board points inside #view (which the view scales and moves),
        // clipped to the board as the export is.
        function draw() {
          const shown = past || board;
          for (const id of ["paper", "cliprect"]) { $(id).setAttribute("width", shown.width); $(id).setAttribute("height", shown.height); }
          const layer = el("g", {id: "items", "clip-path": "url(#clip)"});
          if (shown.background) {
            layer.appendChild(el("image", {href: assetURL(shown.background), x: 0, y: 0, width: shown.width, height: shown.height, preserveAspectRatio: "none"}));
          }
          for (const item of shown.items) {
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
          viewLayer.replaceChild(layer, $("items"));
          if (view.fitted) fitView(); else applyView();
        }
        // Others' pointers at their board points, drawn the same size on screen at any zoom.
        function drawOthers() {
          const layer = el("g", {id: "cursors", "pointer-events": "none"});
          const now = Date.now();
          const names = [];
          for (const [id, p] of others) {
            if (p.expires < now) { others.delete(id); continue; }
            names.push(p.name);
            if (p.ink && p.ink.length >= 4) layer.appendChild(polyline(p.ink, p.color, 3, 0.6));
            if (p.x !== undefined) {
              const g = el("g", {class: "cursor", transform: "translate(" + p.x + " " + p.y + ") scale(" + (1 / view.zoom) + ")"});
              g.appendChild(el("path", {d: "M0 0 L0 16 L4 12 L8 20 L10 19 L6 11 L12 11 Z", fill: p.color, stroke: "#fff"}));
              const label = el("text", {x: 12, y: 24, fill: p.color});
              label.textContent = p.name;
              g.appendChild(label);
              layer.appendChild(g);
            }
          }
          if (ink && ink.points.length >= 2) layer.appendChild(polyline(ink.points, ink.color, ink.width, 1));
          viewLayer.replaceChild(layer, $("cursors"));
          $("who").textContent = $("who").title = names.length ? "on the board: " + names.join(", ") : "";
        }

        """
    }

    /// The board page's script after `viewScript`: editing with the pointer and keys, and the
    /// connection.
    static let boardScriptEnd = """
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
          updateCursor();
        }
        function selectedItem() { return board.items.find((item) => item.id === selected); }
        function capture(event) { try { stage.setPointerCapture(event.pointerId); } catch (e) {} }
        stage.addEventListener("pointerdown", (event) => {
          if (touchDown(event)) return;
          if (ink || drag || panning) return;
          const editing = canEdit && !past;  // a past version is only looked at
          const node = editing && tool === "hand" ? itemAt(event) : null;
          // Panning: the middle button, or with space held, or dragging empty space with Move,
          // or any drag on a page that only reads.
          if (event.button === 1 || (event.button === 0 && (spaceHeld || !editing || (tool === "hand" && !node)))) {
            event.preventDefault();
            if (editing && tool === "hand" && !spaceHeld && event.button === 0 && selected) { selected = null; draw(); }
            startPan(event);
            capture(event);
            return;
          }
          if (event.button !== 0) return;
          const [x, y] = boardPoint(event);
          if (tool === "pen") {
            ink = {points: [x, y], color: $("color").value, width: Number($("width").value), pointer: event.pointerId};
            capture(event);
          } else {
            selected = node ? node.getAttribute("data-id") : null;
            draw();
            const item = selectedItem();
            if (item && item.kind === "sticker") {
              drag = {item: item, from: [x, y], start: [item.x, item.y], node: svg.querySelector("[data-id='" + item.id + "']"), sent: 0, pointer: event.pointerId};
              send({type: "begin-group"});
              capture(event);
            }
          }
        });
        stage.addEventListener("mousedown", (event) => { if (event.button === 1) event.preventDefault(); });
        stage.addEventListener("pointermove", (event) => {
          if (touchMove(event) || movePan(event)) return;
          const [x, y] = boardPoint(event);
          const now = Date.now();
          if (ink && ink.pointer === event.pointerId) { ink.points.push(x, y); drawOthers(); }
          if (drag && drag.pointer === event.pointerId) {
            drag.item.x = drag.start[0] + x - drag.from[0];
            drag.item.y = drag.start[1] + y - drag.from[1];
            if (drag.node) drag.node.setAttribute("transform", stickerTransform(drag.item));
            if (now - drag.sent > 30) { drag.sent = now; send({type: "move", id: drag.item.id, x: drag.item.x, y: drag.item.y}); }
          }
          if (now - lastSent < 50) return;
          lastSent = now;
          const message = {type: "pointer", x: x, y: y};
          if (ink) { message.ink = ink.points.slice(-4000); message.color = ink.color; message.width = ink.width; }
          send(message);
        });
        function finish(event) {
          if (touchUp(event) || endPan(event)) return;
          if (ink && ink.pointer === event.pointerId) {
            if (ink.points.length >= 2) send({type: "stroke", points: ink.points, color: ink.color, width: ink.width});
            ink = null;
            drawOthers();
          }
          if (drag && drag.pointer === event.pointerId) {
            send({type: "move", id: drag.item.id, x: drag.item.x, y: drag.item.y});
            send({type: "end-group"});
            drag = null;
          }
        }
        // A second finger turns a stroke or drag just begun into a pinch: the stroke is dropped,
        // the sticker goes back.
        function abandonEdit() {
          if (ink) { ink = null; drawOthers(); }
          if (drag) {
            drag.item.x = drag.start[0]; drag.item.y = drag.start[1];
            send({type: "move", id: drag.item.id, x: drag.item.x, y: drag.item.y});
            send({type: "end-group"});
            drag = null;
            draw();
          }
        }
        stage.addEventListener("pointerup", finish);
        stage.addEventListener("pointercancel", finish);
        function transform(scaleBy, rotateBy) {
          const item = selectedItem();
          if (!item || item.kind !== "sticker") return;
          send({type: "transform", id: item.id, scale: item.scale * scaleBy, rotation: item.rotation + rotateBy});
        }
        function addSticker(file, x, y) {
          if (!file || file.type !== "image/png") { status("only PNG images can be stickers", "down"); return; }
          // Without a drop point, the middle of what the window shows (on the board).
          if (x === undefined) {
            const box = stage.getBoundingClientRect();
            const [cx, cy] = toBoard(box.left + box.width / 2, box.top + box.height / 2);
            x = Math.round(Math.min(Math.max(cx, 0), board.width));
            y = Math.round(Math.min(Math.max(cy, 0), board.height));
          }
          const reader = new FileReader();
          reader.onload = () => {
            const base64 = String(reader.result).split(",")[1];
            send({type: "sticker", png: base64, x: x, y: y});
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
        stage.addEventListener("dragover", (event) => { if (canEdit && !past) event.preventDefault(); });
        stage.addEventListener("drop", (event) => {
          if (!canEdit || past) return;
          event.preventDefault();
          // Dropped beside the board, it lands on the board's nearest edge.
          const [x, y] = boardPoint(event);
          addSticker(event.dataTransfer.files[0], Math.min(Math.max(x, 0), board.width), Math.min(Math.max(y, 0), board.height));
        });
        // + and - scale the selected sticker, or else zoom; 0 fits, 1 is actual size (with
        // Ctrl or Cmd, +, - and 0 always zoom the board rather than the browser's page).
        document.addEventListener("keydown", (event) => {
          if (event.target.tagName === "INPUT") return;
          const key = event.key, command = event.ctrlKey || event.metaKey;
          if (key === " ") { event.preventDefault(); holdSpace(true); return; }
          const item = canEdit && !command ? selectedItem() : null;
          const sticker = item && item.kind === "sticker";
          if (key === "+" || key === "=") { event.preventDefault(); if (sticker) transform(1.25, 0); else zoomBy(zoomStep); return; }
          if (key === "-" || key === "_") { event.preventDefault(); if (sticker) transform(1 / 1.25, 0); else zoomBy(1 / zoomStep); return; }
          if (key === "0") { event.preventDefault(); fitView(); return; }
          if (key === "1" && !command) { actualSize(); return; }
          if (!canEdit || past) return;
          if (command && key.toLowerCase() === "z") { send({type: event.shiftKey ? "redo" : "undo"}); event.preventDefault(); }
          else if (command || event.altKey) return;
          else if (key === "Delete" || key === "Backspace") $("delete").onclick();
          else if (key === "[") transform(1, -Math.PI / 12);
          else if (key === "]") transform(1, Math.PI / 12);
          else if (key === "p") setTool("pen");
          else if (key === "v") setTool("hand");
        });
        document.addEventListener("keyup", (event) => {
          if (event.key !== " ") return;
          if (event.target.tagName !== "INPUT") event.preventDefault();
          holdSpace(false);
        });
        window.addEventListener("blur", () => holdSpace(false));
        // The time slider: the server lists the versions, renders the board at the one the
        // slider names (asked at most every 100 ms; the server keeps only the latest request),
        // and restores one for a page that edits.
        function showPast(on) {
          $("pastbar").style.display = on ? "inline-flex" : "none";
          $("historyopen").style.display = on ? "none" : "";
          $("tools").className = canEdit && !on ? "on" : "";
          $("restore").style.display = canEdit && on ? "" : "none";
          $("stage").style.background = on ? "#e9dfc4" : "";  // the past, at a glance
          if (!on) { past = null; pastVersion = 0; draw(); }
        }
        function askView() {
          scrubTimer = null;
          const entry = versions[Number($("slider").value)];
          if (!entry) return;
          scrubSent = Date.now();
          send({type: "history-view", version: entry.n});
        }
        $("historyopen").onclick = () => { if (send({type: "history"})) status("reading the history…", "live"); };
        $("livebtn").onclick = () => showPast(false);
        $("slider").oninput = () => {
          if (scrubTimer) return;
          scrubTimer = setTimeout(askView, Math.max(0, 100 - (Date.now() - scrubSent)));
        };
        $("restore").onclick = () => {
          if (pastVersion && confirm("Set the board back to version " + pastVersion + "? Undo takes it back.")) {
            send({type: "history-restore", version: pastVersion});
          }
        };
        function pastLabel(version, time) {
          const names = labelsByVersion.get(version);
          return "version " + version + " of " + versions.count + (time ? " · " + new Date(time).toLocaleString() : "")
            + (names ? " · " + names.map((text) => "“" + text + "”").join(", ") : "");
        }
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
            else if (message.type === "versions") {
              versions.length = 0;
              for (const entry of message.versions) versions.push(entry);
              versions.count = message.count;
              labelsByVersion = new Map();
              for (const label of message.labels || []) {
                if (label.n !== null) labelsByVersion.set(label.n, (labelsByVersion.get(label.n) || []).concat([label.text]));
              }
              $("slider").max = Math.max(0, versions.length - 1);
              $("slider").value = Math.max(0, versions.length - 1);
              status("live", "live");
              if (versions.length === 0) { status("this board has no history yet", "down"); return; }
              showPast(true);
              askView();
            } else if (message.type === "past") {
              if ($("pastbar").style.display === "none") return;  // back to live meanwhile
              past = message.board;
              pastVersion = message.version;
              $("pastlabel").textContent = pastLabel(message.version, message.t);
              draw();
            } else if (message.type === "restored") {
              showPast(false);
              status("restored version " + message.version + " (Undo takes it back)", "live");
            }
            else if (message.type === "welcome") {
              canEdit = message.canEdit;
              $("tools").className = canEdit && !past ? "on" : "";
              $("mode").textContent = canEdit ? "you are " + message.name : "read-only view";
              updateCursor();
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
        fitView();
        connect();

        """
}
