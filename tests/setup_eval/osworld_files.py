"""Writes the files the metric smoke tests compare: for each family an expected file and a changed one, made
with the libraries OSWorld's own metrics read them with. Run by the evaluator interpreter (which has them):

    .venv-osworld/bin/python tests/setup_eval/osworld_files.py OUT_DIR

Each family's expected and changed files share no text, so a content metric scores the pair 0.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

EXPECTED, CHANGED = "Quarterly revenue grew", "Zebras wander quietly"


def pptx(path: Path, text: str) -> None:
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = text
    slide.placeholders[1].text = text.upper()
    deck.save(path)


def docx(path: Path, text: str) -> None:
    from docx import Document

    document = Document()
    document.add_paragraph(text)
    document.save(path)


def xlsx(path: Path, text: str) -> None:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.append(["item", "value"])
    sheet.append([text, len(text) * 3])
    book.save(path)


def csv(path: Path, text: str) -> None:
    path.write_text(f"item,value\n{text},{len(text)}\n")


def pdf(path: Path, text: str) -> None:
    import fitz

    document = fitz.open()  # compare_pdfs is a fuzzy ratio: the changed text shares no character with the other
    document.new_page().insert_text((72, 72), text if text == EXPECTED else "0123456789")
    document.save(path)


def epub(path: Path, text: str) -> None:
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr("chapter1.html", f"<p>{text}</p>")


def png(path: Path, text: str) -> None:
    from PIL import Image

    color = (200, 30, 30) if text == EXPECTED else (30, 30, 200)
    Image.new("RGB", (64, 48), color).save(path)


def video(path: Path, text: str) -> None:
    import cv2
    import numpy as np

    rng = np.random.default_rng(1 if text == EXPECTED else 2)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 64))
    for _ in range(20):
        writer.write(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))
    writer.release()


def mp3(path: Path, text: str) -> None:
    from mutagen.easyid3 import EasyID3
    from mutagen.id3 import ID3

    path.write_bytes(b"\xff\xfb\x90\x00" + bytes(413))  # one silent MPEG frame header and its payload
    ID3().save(path)
    tags = EasyID3(path)
    tags["title"], tags["artist"] = text, "hcu"
    tags.save()


def html(path: Path, text: str) -> None:
    path.write_text(f"<html><body><h1>{text}</h1><p class='x'>{text[::-1]}</p></body></html>")


def zip_(path: Path, text: str) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes/readme.txt", text)


def json_(path: Path, text: str) -> None:
    path.write_text(json.dumps({"editor": {"title": text, "size": 12}}))


def yaml(path: Path, text: str) -> None:
    path.write_text(f"editor:\n  title: {text}\n  size: 12\n")


def txt(path: Path, text: str) -> None:
    path.write_text(f"{text}\n")


WRITERS = {"pptx": pptx, "docx": docx, "xlsx": xlsx, "csv": csv, "pdf": pdf, "epub": epub, "png": png,
           "avi": video, "mp3": mp3, "html": html, "zip": zip_, "json": json_, "yaml": yaml, "txt": txt}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for ext, write in WRITERS.items():
        write(out / f"expected.{ext}", EXPECTED)
        write(out / f"changed.{ext}", CHANGED)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
