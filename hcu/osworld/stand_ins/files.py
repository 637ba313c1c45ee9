"""Stand-in task files, made in the OSWorld interpreter (generate.py): for offline tests only, never for a
scored run.

A task names files by URL (Hugging Face); without the internet the canary sweep and the tests serve, per URL,
a generated file of the type the task expects (from the name it lands under, else the URL's): a workbook, a
document, a presentation, an image, an audio or video clip, an archive, a script. They are written with the
libraries OSWorld's own metrics read such files with (openpyxl, python-docx, python-pptx, odfpy, PyMuPDF,
Pillow, OpenCV, soundfile), so a stand-in is valid for the evaluator too. The content depends on the URL, so a
task's input and its expected file never coincide (an untouched state must not match the gold by accident).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from hcu.osworld.stand_ins import archives


class Seed:
    """Deterministic content for one URL."""

    def __init__(self, url: str, name: str, members: list[str] | None = None) -> None:
        self.url = url
        self.digest = hashlib.sha256(url.encode()).digest()
        self.label = f"hcu stand-in {self.digest.hex()[:8]} for {name}"
        self.name = name
        self.members = members or []
        """An archive's members the task names (paths inside it; a folder ends with "/")."""

    def number(self, index: int, high: int = 1000) -> int:
        return self.digest[index % len(self.digest)] * 7 % high + 1

    def color(self) -> tuple[int, int, int]:
        return self.digest[0], self.digest[1], self.digest[2]


def _xlsx(seed: Seed, path: Path) -> None:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Sheet1"
    sheet.append(["Item", "Quantity", "Price", seed.label])
    for row in range(1, 6):
        sheet.append([f"item {row}", seed.number(row, 50), seed.number(row + 10) / 10])
    second = book.create_sheet("Sheet2")  # workbooks the tasks name often have more than one sheet
    second.append(["Name", "Value"])
    for row in range(1, 4):
        second.append([f"entry {row}", seed.number(row + 20)])
    book.save(path)


def _docx(seed: Seed, path: Path) -> None:
    from docx import Document

    document = Document()
    document.add_heading(seed.label, level=1)
    for index in range(3):
        document.add_paragraph(f"Paragraph {index + 1} of a stand-in document, number {seed.number(index)}.")
    document.save(path)


def _pptx(seed: Seed, path: Path) -> None:
    from pptx import Presentation

    presentation = Presentation()
    _master_colors(presentation.slide_master)
    for index in range(2):
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = f"Slide {index + 1}: {seed.label}"
        slide.placeholders[1].text = f"A stand-in bullet, number {seed.number(index)}"
    presentation.save(path)


def _master_colors(master: object) -> None:
    """Explicit sRGB colours in the slide master (title dark, date/footer/slide number grey), as decks made in
    PowerPoint or LibreOffice carry (python-pptx's default master has theme colours only)."""
    from pptx.oxml.ns import qn
    from pptx.oxml.xmlchemy import OxmlElement

    grey = {"dt", "ftr", "sldNum"}
    for shape in master.placeholders:  # type: ignore[attr-defined]
        kind = shape.element.find(".//" + qn("p:ph")).get("type")
        if kind not in grey | {"title"}:
            continue
        body = shape.element.find(qn("p:txBody"))
        styles = body.find(qn("a:lstStyle"))
        if styles is None:
            styles = OxmlElement("a:lstStyle")
            body.insert(1, styles)
        level = styles.find(qn("a:lvl1pPr"))
        if level is None:
            level = OxmlElement("a:lvl1pPr")
            styles.insert(0, level)
        run = OxmlElement("a:defRPr")
        fill, color = OxmlElement("a:solidFill"), OxmlElement("a:srgbClr")
        color.set("val", "BFBFBF" if kind in grey else "1F3864")
        fill.append(color)
        run.append(fill)
        level.append(run)


def _odf(seed: Seed, path: Path) -> None:
    from odf.opendocument import OpenDocumentSpreadsheet, OpenDocumentText
    from odf.table import Table, TableCell, TableRow
    from odf.text import P

    if path.suffix.lower() == ".ods":
        document = OpenDocumentSpreadsheet()
        table = Table(name="Sheet1")
        for row in range(4):
            cells = TableRow()
            for value in (f"row {row}", seed.number(row)):
                cell = TableCell(valuetype="string" if isinstance(value, str) else "float", value=value)
                cell.addElement(P(text=str(value)))
                cells.addElement(cell)
            table.addElement(cells)
        document.spreadsheet.addElement(table)
    else:
        document = OpenDocumentText()
        document.text.addElement(P(text=seed.label))
    document.save(str(path))


def _pdf(seed: Seed, path: Path) -> None:
    try:
        import pymupdf as fitz
    except ImportError:  # PyMuPDF before 1.24 has only its old name, the one OSWorld's metrics import
        import fitz

    document = fitz.open()
    page = document.new_page()
    page.insert_text((72, 72), seed.label)
    page.insert_text((72, 100), f"A stand-in page, number {seed.number(0)}.")
    document.set_metadata({"title": PurePosixPath(seed.name).stem})
    document.save(str(path))


def _image(seed: Seed, path: Path) -> None:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (320, 200), seed.color())
    draw = ImageDraw.Draw(image)
    shades = random.Random(seed.digest)  # a layout of its own per URL: two stand-ins differ in structure (SSIM)
    for top in range(0, 200, 40):
        for left in range(0, 320, 40):
            draw.rectangle((left, top, left + 39, top + 39), fill=tuple(shades.randrange(256) for _ in range(3)))
    formats = {".jpg": "JPEG", ".jpeg": "JPEG", ".png": "PNG", ".gif": "GIF", ".webp": "WEBP", ".bmp": "BMP",
               ".tif": "TIFF", ".tiff": "TIFF"}
    image.save(path, formats[path.suffix.lower()])


def _xcf(seed: Seed, path: Path) -> None:
    """A GIMP XCF (version 0) of one 64x64 RGB layer, uncompressed: the format's own layout, written out."""
    width = height = 64

    def string(text: str) -> bytes:
        raw = text.encode() + b"\0"
        return struct.pack(">I", len(raw)) + raw

    header = b"gimp xcf file\0" + struct.pack(">III", width, height, 0)
    image_props = struct.pack(">II", 17, 1) + b"\0" + struct.pack(">II", 0, 0)  # compression none, end
    layer_at = len(header) + len(image_props) + 8 + 4  # after one layer pointer, its end mark, no channels
    layer = struct.pack(">III", width, height, 0) + string("Background") + struct.pack(">II", 0, 0)
    hierarchy_at = layer_at + len(layer) + 8
    level_at = hierarchy_at + 12 + 8
    tile_at = level_at + 8 + 4 + 4
    # a shape in the top right corner, in two colours (a large and a small part) on a light background: metrics
    # that find "the object" by colour frequency find it there, never at the centre, and nothing dark is on
    # the left (where a moved text box would be)
    color = seed.color()
    shape, edge = bytes(255 - c for c in color), bytes(c // 2 for c in color)
    ground = bytes(128 + c // 2 for c in color)
    pixels = b"".join(ground * (width - 20) + shape * 14 + edge * 6 if row < 6 else
                      ground * (width - 20) + shape * 20 if row < 20 else ground * width for row in range(height))
    body = (header + image_props + struct.pack(">II", layer_at, 0) + struct.pack(">I", 0)
            + layer + struct.pack(">II", hierarchy_at, 0)
            + struct.pack(">III", width, height, 3) + struct.pack(">II", level_at, 0)
            + struct.pack(">II", width, height) + struct.pack(">II", tile_at, 0) + pixels)
    path.write_bytes(body)


def _video(seed: Seed, path: Path) -> None:
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (320, 240))
    try:
        for frame_index in range(30):  # 3 s
            frame = np.full((240, 320, 3), seed.color(), dtype=np.uint8)
            frame[:, (frame_index * 10) % 320:(frame_index * 10) % 320 + 20] = 255
            writer.write(frame)
    finally:
        writer.release()


def _audio(seed: Seed, path: Path) -> None:
    import numpy as np
    import soundfile

    rate = 22050
    time = np.arange(rate * 2) / rate
    tone = 0.3 * np.sin(2 * np.pi * (220 + seed.number(0, 440)) * time)
    soundfile.write(str(path), tone, rate, format=path.suffix.lstrip(".").upper())
    if path.suffix.lower() == ".mp3":  # an MP3 carries an ID3 tag (here an empty one: no title, no artist)
        from mutagen.id3 import ID3

        ID3().save(str(path))


def _text(seed: Seed, path: Path) -> None:
    suffix, label = path.suffix.lower(), seed.label
    texts = {
        # a script whose output the evaluator parses gets one line of JSON: a stand-in cannot do the real work
        ".py": f'"""{label}"""\n\n\ndef main():\n'
               f'    print({json.dumps(json.dumps({"stand_in": label, "value": seed.number(0)}))})\n\n\n'
               'if __name__ == "__main__":\n    main()\n',
        ".sh": f"#!/bin/sh\n# {label}\necho stand-in {seed.number(0)}\n",
        ".json": json.dumps({"stand_in": label, "value": seed.number(0)}, indent=2) + "\n",
        ".code-workspace": json.dumps({"folders": [{"path": "."}], "settings": {}}, indent=2) + "\n",
        ".csv": "name,value\n" + "".join(f"row {i},{seed.number(i)}\n" for i in range(5)),
        ".html": f"<!DOCTYPE html>\n<html><head><title>{label}</title></head><body><p>{label}</p></body></html>\n",
        ".css": f"/* {label} */\nbody {{ color: #{seed.digest.hex()[:6]}; }}\n",
        ".tex": f"\\documentclass{{article}}\n\\begin{{document}}\n{label}\n\\end{{document}}\n",
        ".bib": f"@misc{{standin{seed.number(0)},\n  title = {{{label}}},\n  year = {{2024}}\n}}\n",
        ".srt": f"1\n00:00:00,000 --> 00:00:02,000\n{label}\n",
        ".eml": f"From: Stand-in <standin@example.com>\nTo: user@example.com\nSubject: {label}\n"
                "Date: Mon, 01 Jan 2024 00:00:00 +0000\nContent-Type: text/plain\n\nA stand-in message.\n",
        ".js": f"// {label}\nconsole.log({seed.number(0)});\n",
    }
    path.write_text(texts.get(suffix, f"{label}\nline 2 of a stand-in text file.\n"))


def _zip(seed: Seed, path: Path) -> None:
    if path.suffix.lower() == ".epub":
        archives.write_epub(str(path), seed.label)
    elif path.suffix.lower() == ".whl":
        archives.write_wheel(str(path), seed.name, seed.label)
    else:
        archives.write_zip(str(path), _members(seed))


def _tar(seed: Seed, path: Path) -> None:
    archives.write_tar(str(path), _members(seed))


def _members(seed: Seed) -> dict[str, bytes | None]:
    def render(member: str) -> bytes:  # each member a stand-in of its own type, seeded by the archive and its path
        kind = kind_of(member)
        with tempfile.TemporaryDirectory() as scratch:
            made = Path(scratch) / f"member{kind or '.bin'}"
            MAKERS.get(kind, _bytes)(Seed(f"{seed.url}#{member}", member), made)
            return made.read_bytes()

    return archives.contents(seed.name, seed.label, seed.members, render)


def _chrome_history(seed: Seed, path: Path) -> None:
    """An empty Chrome History database with the tables OSWorld's `update_browse_history` step fills, stamped
    with the schema version Chrome (Chromium 150: 70, readable from 16 on) expects: Chrome razes a History
    without a version in `meta` at start, which would drop the history a task's setup wrote."""
    with sqlite3.connect(path) as db:
        db.executescript("""
            CREATE TABLE meta(key LONGVARCHAR NOT NULL UNIQUE PRIMARY KEY, value LONGVARCHAR);
            INSERT INTO meta VALUES ('version', '70'), ('last_compatible_version', '16');
            CREATE TABLE urls(id INTEGER PRIMARY KEY AUTOINCREMENT, url LONGVARCHAR, title LONGVARCHAR,
                visit_count INTEGER DEFAULT 0 NOT NULL, typed_count INTEGER DEFAULT 0 NOT NULL,
                last_visit_time INTEGER NOT NULL, hidden INTEGER DEFAULT 0 NOT NULL);
            CREATE INDEX urls_url_index ON urls (url);
            CREATE TABLE visits(id INTEGER PRIMARY KEY AUTOINCREMENT, url INTEGER NOT NULL,
                visit_time INTEGER NOT NULL, from_visit INTEGER, external_referrer_url TEXT,
                transition INTEGER DEFAULT 0 NOT NULL, segment_id INTEGER, visit_duration INTEGER DEFAULT 0 NOT NULL,
                incremented_omnibox_typed_score BOOLEAN DEFAULT FALSE NOT NULL, opener_visit INTEGER,
                originator_cache_guid TEXT, originator_visit_id INTEGER, originator_from_visit INTEGER,
                originator_opener_visit INTEGER, is_known_to_sync BOOLEAN DEFAULT FALSE NOT NULL,
                consider_for_ntp_most_visited BOOLEAN DEFAULT FALSE NOT NULL,
                visited_link_id INTEGER DEFAULT 0 NOT NULL, app_id TEXT);
            CREATE INDEX visits_url_index ON visits (url);
            CREATE INDEX visits_from_index ON visits (from_visit);
            CREATE INDEX visits_time_index ON visits (visit_time);
            CREATE INDEX visits_originator_id_index ON visits (originator_visit_id);
        """)
    db.close()


def _bytes(seed: Seed, path: Path) -> None:
    path.write_bytes(seed.digest * 64)


MAKERS: dict[str, Callable[[Seed, Path], None]] = {
    ".xlsx": _xlsx, ".xlsm": _xlsx, ".docx": _docx, ".pptx": _pptx, ".ods": _odf, ".odt": _odf, ".pdf": _pdf,
    ".png": _image, ".jpg": _image, ".jpeg": _image, ".gif": _image, ".webp": _image, ".bmp": _image,
    ".tif": _image, ".tiff": _image, ".xcf": _xcf, ".mp4": _video, ".avi": _video, ".mp3": _audio,
    ".wav": _audio, ".flac": _audio, ".ogg": _audio, ".zip": _zip, ".epub": _zip, ".vsix": _zip, ".whl": _zip,
    ".gz": _tar, ".tgz": _tar, ".xz": _tar, ".bz2": _tar, ".tar": _tar, ".sqlite": _chrome_history,
    **{suffix: _text for suffix in (".txt", ".md", ".py", ".sh", ".json", ".csv", ".html", ".css", ".tex",
                                    ".bib", ".srt", ".eml", ".code-workspace", ".js", ".xml", ".yaml", ".yml")},
}
"""By file suffix. Old binary Office formats (.xls, .ppt) get their OOXML counterpart: LibreOffice detects a
file's format from its content, not its name."""
ALIASES = {".xls": ".xlsx", ".ppt": ".pptx", ".doc": ".docx"}


def kind_of(*names: str) -> str:
    """The suffix whose maker serves the first of `names` with a known type ("" when none has one)."""
    for name in names:
        suffix = PurePosixPath(name.lower()).suffix
        suffix = ALIASES.get(suffix, suffix)
        if suffix in MAKERS:
            return suffix
    return ""


def make(url: str, names: list[str], target: str, members: list[str] | None = None,
         role: str = "input") -> dict[str, str]:
    """Write the stand-in for `url` at `target` (atomically); `names` are where it lands (first first), then
    the URL's own file name; `members`, what an archive must hold. An `expected` file (a gold an evaluator
    compares with) holds a finished task's work besides (gold.py). Returns the kind it was made as."""
    kind = kind_of(*names, PurePosixPath(url.split("?")[0]).name)
    seed = Seed(url, names[0] if names else url, members)
    destination = Path(target)
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(dir=destination.parent, prefix=".stand-in.", suffix=kind or ".bin")
    os.close(fd)
    try:
        MAKERS.get(kind, _bytes)(seed, Path(scratch))
        if role == "expected":
            from hcu.osworld.stand_ins import gold

            gold.finish(kind, seed, Path(scratch))
        os.replace(scratch, destination)
    finally:
        Path(scratch).unlink(missing_ok=True)
    return {"kind": kind or "bytes"}
