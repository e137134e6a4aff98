extension WebPage {
    /// The board page: draws the board in SVG from the WebSocket's JSON, redraws as it changes,
    /// shows others' pointers and ink in progress, sends this page's pointer, and reconnects
    /// (catching up with the whole board) when the connection drops. The board is fitted to the
    /// window (on load and on resize, until the user zooms or pans), zoomed and panned; every
    /// edit and pointer is in board points whatever the view. With a token that may write, it
    /// edits: draw strokes, add a PNG sticker (choose or drop a file), drag, scale and rotate
    /// stickers, delete, bring to front or back, undo and redo. History scrubs the board's past
    /// versions (the server renders each, WebView+History.swift), read-only while shown; an
    /// editing page may restore the one shown.
    static func board(name: String) -> (html: String, script: String) {
        let top = """
        <!doctype html><html lang="en"><head><meta charset="utf-8"><title>\(escapeHTML(name)) — BoardSync</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>
        html,body{margin:0;height:100%;font:14px system-ui,sans-serif;background:#eceef2;overflow:hidden}
        body{display:flex;flex-direction:column}
        #bar{flex:none;padding:6px 10px;background:#fff;border-bottom:1px solid #ccd;display:flex;gap:8px;align-items:center;z-index:2;flex-wrap:wrap}
        #status{padding:2px 8px;border-radius:10px;background:#ddd}
        #status.live{background:#c8f0c8}#status.down{background:#f6c8c8}
        #tools{display:none;gap:6px;align-items:center;flex-wrap:wrap}
        #tools.on{display:flex}
        #zoom{display:flex;gap:4px;align-items:center}
        #zoomlevel{min-width:3.5em;text-align:center;color:#444;font-variant-numeric:tabular-nums}
        #who{flex:1 1 0;min-width:0;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;text-align:right}
        button{font:inherit;padding:2px 8px}
        button.active{background:#335;color:#fff}
        #stage{flex:1;position:relative;overflow:hidden;min-height:0;touch-action:none;user-select:none}
        #stage.draw{cursor:crosshair}
        #stage.pan{cursor:grab}
        #stage.panning{cursor:grabbing}
        svg#board{position:absolute;left:0;top:0;width:100%;height:100%;display:block;transform-origin:0 0;will-change:transform}
        .cursor text{font:12px system-ui,sans-serif}
        .selected{outline:2px dashed #3355aa}
        </style></head><body>
        <div id="bar"><b>\(escapeHTML(name))</b><span id="status">connecting…</span>
        <span id="zoom">
          <button id="fit" title="Fit the board to the window (0)">Fit</button><button id="zoomout" title="Zoom out (-, Ctrl+wheel)">−</button><span id="zoomlevel">100%</span><button id="zoomin" title="Zoom in (+, Ctrl+wheel)">+</button><button id="actual" title="Actual size (1)">100%</button>
        </span>
        <span id="tools">
          <button id="pen" class="active" title="Draw (P)">Pen</button><button id="hand" title="Select and drag (V); drag empty space to pan">Move</button>
          <input id="color" type="color" value="#224488" title="Ink colour"><input id="width" type="range" min="1" max="24" value="4" title="Ink width">
          <label><input id="file" type="file" accept="image/png" style="display:none"><button id="add" type="button">Sticker…</button></label>
          <button id="smaller" title="Smaller (- with a sticker selected)">−</button><button id="bigger" title="Bigger (+ with a sticker selected)">+</button>
          <button id="left" title="Rotate left ([)">⟲</button><button id="right" title="Rotate right (])">⟳</button>
          <button id="front" title="Bring to front">Front</button><button id="back" title="Send to back">Back</button>
          <button id="delete" title="Delete (Del)">Delete</button>
          <button id="undo" title="Undo (Ctrl+Z)">Undo</button><button id="redo" title="Redo (Ctrl+Shift+Z)">Redo</button>
        </span>
        <span id="mode" style="color:#666">read-only view</span>
        <span id="past"><button id="historyopen" title="Scrub the board's history">History</button>
          <span id="pastbar" style="display:none;gap:6px;align-items:center"><input id="slider" type="range" min="0" max="0" value="0" title="Version">
          <span id="pastlabel" style="font-variant-numeric:tabular-nums"></span><button id="restore" style="display:none" title="Set the board back to this version (one step Undo takes back)">Restore this version</button><button id="livebtn">Back to live</button></span></span>
        <span id="who"></span></div>
        <div id="stage"><svg id="board" xmlns="http://www.w3.org/2000/svg">
        <defs><clipPath id="clip"><rect id="cliprect" x="0" y="0" width="800" height="600"/></clipPath></defs>
        <g id="view"><rect id="paper" x="0" y="0" width="800" height="600" fill="#fff" stroke="#0003" stroke-width="1" vector-effect="non-scaling-stroke"/>
        <g id="items"/><g id="cursors"/></g></svg></div>
        <script>
        """
        // The script is served as it is hashed: the policy allows exactly these bytes.
        let script = boardScriptStart(name: name) + viewScript + boardScriptEnd
        return (top + script + "</script></body></html>", script)
    }
}
