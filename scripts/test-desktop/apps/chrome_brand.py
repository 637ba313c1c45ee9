#!/usr/bin/python3
"""Names Debian's Chromium "Google Chrome" in its English UI strings, as the official guest's browser is named.

Tasks activate the browser by its window title ("Google Chrome", 28 tasks) and agents read the title on
screen; Chromium's titles end in "- Chromium". The strings live in a locale .pak file (format version 5:
header, a table of (id, offset) entries, aliases, then the data); this rewrites the data and the offsets.
usage: chrome_brand.py LOCALE_PAK   (e.g. /usr/lib/chromium/locales/en-US.pak, rewritten in place)
"""

from __future__ import annotations

import struct
import sys

OLD, NEW = b"Chromium", b"Google Chrome"
HEADER = struct.Struct("<IB3xHH")  # version, encoding, padding, resource count, alias count
ENTRY = struct.Struct("<HI")  # resource id, offset of its data
ALIAS = struct.Struct("<HH")  # resource id, index of the entry it shares


def rebrand(pak: bytes) -> bytes:
    version, encoding, count, alias_count = HEADER.unpack_from(pak)
    if version != 5:
        raise SystemExit(f"chrome_brand: pak format {version}, expected 5")
    table = HEADER.size
    entries = [ENTRY.unpack_from(pak, table + i * ENTRY.size) for i in range(count + 1)]  # +1: end marker
    aliases = pak[table + (count + 1) * ENTRY.size : table + (count + 1) * ENTRY.size + alias_count * ALIAS.size]
    data = [pak[entries[i][1] : entries[i + 1][1]].replace(OLD, NEW) for i in range(count)]
    offset = table + (count + 1) * ENTRY.size + len(aliases)
    out = [HEADER.pack(version, encoding, count, alias_count)]
    for (resource, _), blob in zip(entries[:count], data, strict=True):
        out.append(ENTRY.pack(resource, offset))
        offset += len(blob)
    out.append(ENTRY.pack(entries[count][0], offset))  # the end marker
    return b"".join([*out, aliases, *data])


def main() -> None:
    path = sys.argv[1]
    with open(path, "rb") as file:
        pak = file.read()
    branded = rebrand(pak)
    if OLD in branded or NEW not in branded:
        raise SystemExit(f"chrome_brand: {path} still names {OLD.decode()} (or never did)")
    with open(path, "wb") as file:
        file.write(branded)


if __name__ == "__main__":
    main()
