#!/usr/bin/env python3
"""Writes the PNG decoder's fixtures: every colour type and bit depth, with and without tRNS,
plain and Adam7-interlaced, every row filter; and for each the expected 8-bit RGBA pixels
(NAME.rgba), computed here from the samples, independently of the Swift decoder.

Run from this directory: python3 make_png_fixtures.py  (needs only the standard library)."""
import struct, zlib

W, H = 13, 11  # odd sizes: partial bytes at low depths, empty Adam7 passes on small images
seed = 12345

def rand():
    global seed
    seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
    return seed >> 8

def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

def pack_row(samples, depth):
    if depth == 8:
        return bytes(samples)
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    out, acc, bits = bytearray(), 0, 0
    for s in samples:
        acc = (acc << depth) | s
        bits += depth
        if bits == 8:
            out.append(acc); acc, bits = 0, 0
    if bits:
        out.append(acc << (8 - bits))
    return bytes(out)

def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)

def filter_row(kind, row, prev, bpp):
    out = bytearray()
    for i, x in enumerate(row):
        a = row[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
        out.append((x - pred) & 0xFF)
    return bytes([kind]) + bytes(out)

PASSES = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]

def encode(samples, channels, depth, color_type, interlaced, palette=None, trns=None):
    """samples[y][x] is a tuple of `channels` samples at `depth`."""
    bpp = max(1, channels * depth // 8)
    raw = bytearray()
    passes = PASSES if interlaced else [(0, 0, 1, 1)]
    row_number = 0
    for (x0, y0, dx, dy) in passes:
        cols = list(range(x0, W, dx))
        rows = list(range(y0, H, dy))
        if not cols or not rows:
            continue
        prev = bytes((len(cols) * channels * depth + 7) // 8)
        for y in rows:
            flat = [s for x in cols for s in samples[y][x]]
            row = pack_row(flat, depth)
            raw += filter_row(row_number % 5, row, prev, bpp)
            row_number += 1
            prev = row
    png = b"\x89PNG\r\n\x1a\n"
    png += chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, depth, color_type, 0, 0, 1 if interlaced else 0))
    png += chunk(b"tEXt", b"Comment\x00an ancillary chunk the decoder skips")
    if palette is not None:
        png += chunk(b"PLTE", bytes(c for entry in palette for c in entry))
    if trns is not None:
        png += chunk(b"tRNS", trns)
    data = zlib.compress(bytes(raw), 9)
    # Two IDAT chunks: the decoder must join them.
    png += chunk(b"IDAT", data[: len(data) // 2]) + chunk(b"IDAT", data[len(data) // 2 :])
    png += chunk(b"IEND", b"")
    return png

def to8(v, depth):
    if depth == 16:
        return v >> 8
    if depth == 8:
        return v
    return v * 255 // ((1 << depth) - 1)

def make(name, color_type, depth, interlaced, with_trns):
    top = (1 << depth) - 1
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color_type]
    palette = trns = None
    if color_type == 3:
        count = min(1 << depth, 200)
        palette = [(rand() & 255, rand() & 255, rand() & 255) for _ in range(count)]
        samples = [[(rand() % count,) for _ in range(W)] for _ in range(H)]
        alphas = [rand() & 255 for _ in range(count // 2)] if with_trns else []
        if with_trns:
            trns = bytes(alphas)
        expected = bytearray()
        for y in range(H):
            for x in range(W):
                i = samples[y][x][0]
                expected += bytes(palette[i]) + bytes([alphas[i] if i < len(alphas) else 255])
    else:
        samples = [[tuple(rand() & top for _ in range(channels)) for _ in range(W)] for _ in range(H)]
        key = None
        if with_trns:
            key = samples[3][4][:channels]  # a colour that occurs, so some pixels turn transparent
            trns = b"".join(struct.pack(">H", k) for k in key)
        expected = bytearray()
        for y in range(H):
            for x in range(W):
                s = samples[y][x]
                if color_type == 0:
                    g = to8(s[0], depth)
                    expected += bytes([g, g, g, 0 if key is not None and s == key else 255])
                elif color_type == 2:
                    expected += bytes([to8(v, depth) for v in s]) + bytes([0 if key is not None and s == key else 255])
                elif color_type == 4:
                    g = to8(s[0], depth)
                    expected += bytes([g, g, g, to8(s[1], depth)])
                else:
                    expected += bytes([to8(v, depth) for v in s])
    png = encode(samples, channels, depth, color_type, interlaced, palette, trns)
    open(name + ".png", "wb").write(png)
    open(name + ".rgba", "wb").write(bytes(expected))

combos = {0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16]}
for color_type, depths in combos.items():
    for depth in depths:
        for interlaced in (False, True):
            for with_trns in ((False, True) if color_type in (0, 2, 3) else (False,)):
                name = "ct%d-d%02d%s%s" % (color_type, depth, "-adam7" if interlaced else "", "-trns" if with_trns else "")
                make(name, color_type, depth, interlaced, with_trns)
