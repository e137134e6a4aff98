extension WebPage {
    /// The board page's view: the board point (x, y) is shown at (left + x·zoom, top + y·zoom)
    /// CSS pixels from the stage's corner. `toBoard` is the one conversion from the screen to
    /// board points. The SVG is drawn at the view (`#view`'s transform: crisp at any zoom and
    /// device pixel ratio) once the view rests for 100 ms (and every 250 ms while it moves when
    /// drawing is quick); meanwhile a CSS transform of the whole SVG (its own layer, moved
    /// without repainting) shows it at the view, so zooming and panning stay smooth on a board
    /// of thousands of items.
    /// Fitted on load and on resize until the user zooms or pans; zoom within 0.05×–16×, about
    /// the cursor (Ctrl+wheel, a trackpad's pinch), the window's middle (buttons, keys) or two
    /// fingers; pan with the wheel, the middle button, space or Move on empty space, or two
    /// fingers.
    static let viewScript = """
        const minZoom = 0.05, maxZoom = 16, zoomStep = 1.25, fitMargin = 16, keepInSight = 48;
        const view = {zoom: 1, left: 0, top: 0, fitted: true};
        let panning = null, pinch = null, spaceHeld = false;
        let drawn = {zoom: 1, left: 0, top: 0}, commitTimer = 0, lastCommit = -1e9, commitCost = 0;
        const touches = new Map();
        function clampZoom(zoom) { return Math.min(maxZoom, Math.max(minZoom, zoom)); }
        // The board point under a point on the screen (client coordinates).
        function toBoard(clientX, clientY) {
          const box = stage.getBoundingClientRect();
          return [(clientX - box.left - view.left) / view.zoom, (clientY - box.top - view.top) / view.zoom];
        }
        // An event's board point, on the board's 1/16-point grid.
        function boardPoint(event) {
          const [x, y] = toBoard(event.clientX, event.clientY);
          return [Math.round(x * 16) / 16, Math.round(y * 16) / 16];
        }
        function applyView() {
          // Some of the board always stays in sight.
          const w = stage.clientWidth, h = stage.clientHeight;
          view.left = Math.min(Math.max(view.left, keepInSight - board.width * view.zoom), w - keepInSight);
          view.top = Math.min(Math.max(view.top, keepInSight - board.height * view.zoom), h - keepInSight);
          svg.setAttribute("data-zoom", view.zoom);
          $("zoomlevel").textContent = (view.zoom < 0.1 ? (view.zoom * 100).toFixed(1) : Math.round(view.zoom * 100)) + "%";
          const scale = view.zoom / drawn.zoom;
          svg.style.transform = "translate(" + (view.left - scale * drawn.left) + "px," + (view.top - scale * drawn.top) + "px) scale(" + scale + ")";
          clearTimeout(commitTimer);
          if (commitCost < 60 && performance.now() - lastCommit > 250) commitView(); else commitTimer = setTimeout(commitView, 100);
        }
        // Draws the SVG at the view.
        function commitView() {
          clearTimeout(commitTimer);
          lastCommit = performance.now();
          drawn = {zoom: view.zoom, left: view.left, top: view.top};
          viewLayer.setAttribute("transform", "translate(" + view.left + " " + view.top + ") scale(" + view.zoom + ")");
          svg.style.transform = "";
          drawOthers();
          // What drawing costs: the time to the frame after next (two frames when it is quick).
          const started = lastCommit;
          requestAnimationFrame(() => requestAnimationFrame(() => { commitCost = performance.now() - started; }));
        }
        function fitView() {
          const w = stage.clientWidth, h = stage.clientHeight;
          const zoom = clampZoom(Math.min((w - 2 * fitMargin) / board.width, (h - 2 * fitMargin) / board.height));
          view.zoom = zoom;
          view.left = (w - board.width * zoom) / 2;
          view.top = (h - board.height * zoom) / 2;
          view.fitted = true;
          applyView();
        }
        // Zoom to `zoom`, keeping the board point under the stage point (x, y) where it is.
        function zoomTo(zoom, x, y) {
          zoom = clampZoom(zoom);
          const boardX = (x - view.left) / view.zoom, boardY = (y - view.top) / view.zoom;
          view.zoom = zoom;
          view.left = x - boardX * zoom;
          view.top = y - boardY * zoom;
          view.fitted = false;
          applyView();
        }
        // Zoom by `factor` about a point on the screen (the stage's middle without one).
        function zoomBy(factor, clientX, clientY) {
          const box = stage.getBoundingClientRect();
          const x = clientX === undefined ? box.width / 2 : clientX - box.left;
          const y = clientY === undefined ? box.height / 2 : clientY - box.top;
          zoomTo(view.zoom * factor, x, y);
        }
        function actualSize() { zoomTo(1, stage.clientWidth / 2, stage.clientHeight / 2); }
        function panBy(dx, dy) {
          view.left += dx;
          view.top += dy;
          view.fitted = false;
          applyView();
        }
        function updateCursor() {
          stage.className = panning ? "panning" : spaceHeld || !canEdit || tool === "hand" ? "pan" : "draw";
        }
        function holdSpace(held) {
          if (spaceHeld === held) return;
          spaceHeld = held;
          updateCursor();
        }
        function startPan(event) {
          panning = {pointer: event.pointerId, x: event.clientX, y: event.clientY};
          updateCursor();
        }
        function movePan(event) {
          if (!panning || panning.pointer !== event.pointerId) return false;
          panBy(event.clientX - panning.x, event.clientY - panning.y);
          panning.x = event.clientX;
          panning.y = event.clientY;
          return true;
        }
        function endPan(event) {
          if (!panning || panning.pointer !== event.pointerId) return false;
          panning = null;
          updateCursor();
          return true;
        }
        // Two fingers pan and pinch: the board point under their middle stays under it.
        function twoTouches() {
          const [a, b] = [...touches.values()];
          return {x: (a[0] + b[0]) / 2, y: (a[1] + b[1]) / 2, distance: Math.hypot(a[0] - b[0], a[1] - b[1]) || 1};
        }
        function touchDown(event) {
          if (event.pointerType !== "touch") return false;
          touches.set(event.pointerId, [event.clientX, event.clientY]);
          if (touches.size < 2) return false;
          if (touches.size === 2) {
            abandonEdit();
            panning = null;
            const t = twoTouches();
            pinch = {zoom: view.zoom, distance: t.distance, at: toBoard(t.x, t.y)};
            capture(event);
          }
          return true;
        }
        function touchMove(event) {
          if (!touches.has(event.pointerId)) return false;
          touches.set(event.pointerId, [event.clientX, event.clientY]);
          if (!pinch) return false;
          if (touches.size >= 2) {
            const t = twoTouches(), box = stage.getBoundingClientRect();
            const zoom = clampZoom(pinch.zoom * t.distance / pinch.distance);
            view.zoom = zoom;
            view.left = t.x - box.left - pinch.at[0] * zoom;
            view.top = t.y - box.top - pinch.at[1] * zoom;
            view.fitted = false;
            applyView();
          }
          return true;
        }
        function touchUp(event) {
          if (!touches.delete(event.pointerId)) return false;
          if (!pinch) return false;
          if (touches.size === 0) pinch = null;
          return true;
        }
        // The wheel pans; with Ctrl (or Cmd, or a trackpad's pinch) it zooms about the cursor.
        stage.addEventListener("wheel", (event) => {
          event.preventDefault();
          const unit = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? stage.clientHeight : 1;
          let dx = event.deltaX * unit, dy = event.deltaY * unit;
          if (event.ctrlKey || event.metaKey) {
            zoomBy(Math.exp(-Math.min(50, Math.max(-50, dy)) / 100), event.clientX, event.clientY);
            return;
          }
          if (event.shiftKey && dx === 0) { dx = dy; dy = 0; }
          panBy(-dx, -dy);
        }, {passive: false});
        $("fit").onclick = fitView;
        $("actual").onclick = actualSize;
        $("zoomin").onclick = () => zoomBy(zoomStep);
        $("zoomout").onclick = () => zoomBy(1 / zoomStep);
        new ResizeObserver(() => { if (view.fitted) fitView(); else applyView(); }).observe(stage);

        """
}
