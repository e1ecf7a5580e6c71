#!/usr/bin/env python3
"""Reads an 8-bit RGB/RGBA PNG (zlib and the five row filters, nothing else) and prints, for the
region X0 Y0 X1 Y1, the pixel variance of the grey level and how many pixels are close to the
colour RRGGBB: `variance=<v> matching=<n> width=<w> height=<h>`. For the browser test."""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, "unsupported PNG"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows


def main():
    path, x0, y0, x1, y1, colour = sys.argv[1], *map(int, sys.argv[2:6]), sys.argv[6]
    want = tuple(int(colour[i:i + 2], 16) for i in (0, 2, 4))
    width, height, channels, rows = read_png(path)
    x1, y1 = min(x1, width), min(y1, height)
    greys, matching = [], 0
    for y in range(y0, y1):
        row = rows[y]
        for x in range(x0, x1):
            r, g, b = row[x * channels:x * channels + 3]
            greys.append((r + g + b) / 3)
            matching += max(abs(r - want[0]), abs(g - want[1]), abs(b - want[2])) <= 40
    mean = sum(greys) / max(1, len(greys))
    variance = sum((v - mean) ** 2 for v in greys) / max(1, len(greys))
    print(f"variance={variance:.2f} matching={matching} width={width} height={height}")


main()
