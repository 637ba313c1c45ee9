"""What an expected stand-in holds beyond an input one: the finished work a task's gold file shows.

A task's evaluator compares the file the agent leaves with the gold file it downloads. Its input and gold
stand-ins differ in content (both are made from their URL), but alike in structure, a check that compares only
structure would pass on the untouched state: tables in a document (none in either), its images, its references
section, its number of lines; a workbook's pivot tables or charts on a new sheet (no such sheet in either). So a
stand-in made for an `expected` getter (plan.task_files) adds what a finished task adds: a document gets
a table, an image, a references section and more paragraphs; a workbook gets a Sheet2 holding a chart and a
pivot table over Sheet1. A file a task also fetches as its input stays an input (the untouched file is it).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


class SeedLike(Protocol):
    label: str

    def number(self, index: int, high: int = 1000) -> int: ...

    def color(self) -> tuple[int, int, int]: ...


def _finished_document(seed: SeedLike, path: Path) -> None:
    from docx import Document
    from docx.shared import Inches
    from PIL import Image

    document = Document(str(path))
    document.add_paragraph(f"Finished work of {seed.label}.")
    rows, columns = 2 + seed.number(4, 4), 2 + seed.number(5, 4)
    table = document.add_table(rows=rows, cols=columns)
    for row in range(rows):
        for column in range(columns):
            table.cell(row, column).text = f"r{row + 1}c{column + 1} {seed.number(row * columns + column)}"
    picture = io.BytesIO()
    Image.new("RGB", (48, 32), seed.color()).save(picture, "PNG")
    picture.seek(0)
    document.add_picture(picture, width=Inches(1))
    document.add_paragraph("References")
    for index in range(2):
        document.add_paragraph(f"Author, A. ({2000 + seed.number(index, 24)}). {seed.label}, part {index + 1}.")
    document.save(str(path))


def _finished_workbook(seed: SeedLike, path: Path) -> None:
    from openpyxl import load_workbook
    from openpyxl.chart import BarChart, Reference
    from openpyxl.pivot.cache import CacheDefinition, CacheField, CacheSource, SharedItems, WorksheetSource
    from openpyxl.pivot.fields import Text
    from openpyxl.pivot.table import DataField, FieldItem, Location, PivotField, RowColField, TableDefinition

    book = load_workbook(path)
    data = book.worksheets[0]
    last = data.max_row
    if "Sheet2" in book.sheetnames:  # the input's second sheet becomes the finished summary
        del book["Sheet2"]
    summary = book.create_sheet("Sheet2")
    chart = BarChart()
    chart.title = seed.label
    chart.add_data(Reference(data, min_col=2, min_row=1, max_row=last), titles_from_data=True)
    chart.set_categories(Reference(data, min_col=1, min_row=2, max_row=last))
    summary.add_chart(chart, "E2")

    items = [str(data.cell(row, 1).value) for row in range(2, last + 1)]
    categories = SharedItems(_fields=[Text(v=item) for item in items], count=len(items))
    fields = [CacheField(name=str(data.cell(1, column).value or f"Column {column}"),
                         sharedItems=categories if column == 1 else SharedItems())
              for column in range(1, 4)]
    source = CacheSource(type="worksheet", worksheetSource=WorksheetSource(ref=f"A1:C{last}", sheet=data.title))
    pivot = TableDefinition(
        name="PivotTable1", cacheId=1, dataCaption="Values", updatedVersion=6, createdVersion=6,
        location=Location(ref=f"A1:B{len(items) + 2}", firstHeaderRow=1, firstDataRow=1, firstDataCol=1),
        pivotFields=[PivotField(axis="axisRow", showAll=False,
                                items=[FieldItem(x=index) for index in range(len(items))] + [FieldItem(t="default")]),
                     PivotField(dataField=True, showAll=False), PivotField(showAll=False)],
        rowFields=[RowColField(x=0)], dataFields=[DataField(name=f"Sum of {fields[1].name}", fld=1, baseField=0,
                                                            baseItem=0)])
    pivot.cache = CacheDefinition(cacheSource=source, cacheFields=fields, refreshOnLoad=True)
    summary.add_pivot(pivot)
    book.save(path)


FINISHERS: dict[str, Callable[[SeedLike, Path], None]] = {".docx": _finished_document, ".xlsx": _finished_workbook}
"""By the kind the stand-in was made as (files.kind_of)."""


def finish(kind: str, seed: SeedLike, path: Path) -> None:
    """Add to the stand-in at `path` what a finished task's file of its kind holds (no-op for other kinds)."""
    if kind in FINISHERS:
        FINISHERS[kind](seed, path)
