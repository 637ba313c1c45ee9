"""Stand-in task files: which files a task fetches, the stand-in cache and its marker, files of every type read
back by the libraries OSWorld's metrics read them with, and that results made with stand-ins never enter a
scored run (run_queue and summarize refuse them)."""

from __future__ import annotations

import subprocess
import tarfile
import zipfile
from pathlib import Path

import orjson
import pytest

from hcu.osworld.osworld_bridge.assets import STAND_IN_MARKER, AssetCache, AssetError, cache_path, holds_stand_ins
from hcu.osworld.osworld_bridge.process import child_env
from hcu.osworld.osworld_bridge.tasks import load_task
from hcu.osworld.run_config import ConfigError, parse_config
from hcu.osworld.stand_ins.plan import archive_members, expected_files, task_files
from hcu.osworld.stand_ins.source import StandInAssets
from hcu.osworld.summary.run_summary import SummaryError, summarize
from tests.official_tasks import OFFICIAL_TASKS

HF = "https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main"


def test_every_file_a_task_fetches_is_named_with_where_it_lands() -> None:
    calc = load_task("v1", "4e6fcf72-daf3-439f-a232-c434ce416af6", "libreoffice_calc", OFFICIAL_TASKS)
    assert task_files(calc) == {  # setup's input, and the gold that postconfig downloads
        f"{HF}/libreoffice_calc/4e6fcf72-daf3-439f-a232-c434ce416af6/Employee_Age_By_Birthday.xlsx":
            ["Employee_Age_By_Birthday.xlsx"],
        f"{HF}/libreoffice_calc/4e6fcf72-daf3-439f-a232-c434ce416af6/Employee_Age_By_Birthday_gold.xlsx":
            ["Employee_Age_By_Birthday_gold.xlsx"]}
    impress = load_task("v1", "550ce7e7-747b-495f-b122-acdc4d0b8e54", "libreoffice_impress", OFFICIAL_TASKS)
    named = task_files(impress)  # URLs ending .data land as .pptx: the landing name says what to make
    data = {url.rsplit("/", 1)[1]: names for url, names in named.items() if url.endswith(".data")}
    assert data == {"New_Club_Spring_2018_Training.data": ["New_Club_Spring_2018_Training.pptx"],
                    "New_Club_Spring_2018_Training_with_strike.data": ["New_Club_Spring_2018_Training_Gold.pptx"]}
    history = load_task("v1", "44ee5668-ecd5-4366-a6ce-c1c9b8d4e938", "chrome", OFFICIAL_TASKS)
    assert list(task_files(history).values()) == [["history_new.sqlite"]]  # update_browse_history's database


def test_stand_ins_live_in_a_marked_cache_of_their_own(tmp_path: Path) -> None:
    cache = StandInAssets.at(tmp_path / "stand-ins", None)
    assert (cache.stand_ins, cache.offline) == (True, True) and holds_stand_ins(cache.root)
    assert "never" in (cache.root / STAND_IN_MARKER).read_text().lower()
    # whatever runs on a marked cache is marked, flag or not
    assert AssetCache.configured(cache.root, offline=True).stand_ins
    real = tmp_path / "assets"
    cache_path(real, f"{HF}/os/t/photo.jpg").parent.mkdir(parents=True)
    cache_path(real, f"{HF}/os/t/photo.jpg").write_bytes(b"a real photo")
    with pytest.raises(AssetError, match="holds real task files; give stand-ins a folder of their own"):
        StandInAssets.at(real, None)
    assert not holds_stand_ins(real)


def test_no_stand_in_is_written_into_a_real_cache(tmp_path: Path) -> None:
    task = load_task("v1", "4e6fcf72-daf3-439f-a232-c434ce416af6", "libreoffice_calc", OFFICIAL_TASKS)
    AssetCache.configured(tmp_path, offline=True).prepare(task)
    assert list(tmp_path.iterdir()) == []


def test_a_stand_in_source_makes_what_the_task_fetches_once(tmp_path: Path, evaluator_python: Path) -> None:
    task = load_task("v1", "4e6fcf72-daf3-439f-a232-c434ce416af6", "libreoffice_calc", OFFICIAL_TASKS)
    source = StandInAssets.at(tmp_path / "stand-ins", evaluator_python)
    source.prepare(task)
    made = [cache_path(source.root, url) for url in task_files(task)]
    assert all(path.is_file() for path in made) and len(made) == 2
    stamps = [path.stat().st_mtime_ns for path in made]
    source.prepare(task)
    assert [path.stat().st_mtime_ns for path in made] == stamps, "what the cache holds is not made again"


def generate(python: Path, folder: Path, files: dict[str, list[str]]) -> None:
    """Stand-ins for `files` (name: archive members) in `folder`, made as the stand-in source makes them."""
    jobs = [{"url": f"{HF}/x/{name}", "names": [name], "target": str(folder / name), "members": members,
             "role": "input"} for name, members in files.items()]
    done = subprocess.run([str(python), "-m", "hcu.osworld.stand_ins.generate"], input=orjson.dumps(jobs).decode(),
                          capture_output=True, text=True, env=child_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_run_config_with_stand_ins_is_refused(tmp_path: Path) -> None:
    body = {"run_id": "r", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path), "tasks": ["t1"]}
    with pytest.raises(ConfigError, match="asset_stand_ins: a run config makes a scored run"):
        parse_config({**body, "asset_stand_ins": True}, tmp_path / "r.json")
    marked = StandInAssets.at(tmp_path / "generated", None).root
    with pytest.raises(ConfigError, match="stand-ins .generated task files"):
        parse_config({**body, "asset_cache": str(marked)}, tmp_path / "r.json")


def test_summarize_refuses_results_made_with_stand_ins(tmp_path: Path) -> None:
    body = {"run_id": "mixed", "benchmark_version": "v1", "agent": "codex", "test_desktop": True,
            "gateway": "http://127.0.0.1:9", "results_dir": str(tmp_path), "tasks": ["a", "b"]}
    config = parse_config(body, tmp_path / "mixed.json")
    for task_id, stand_ins in (("a", False), ("b", True)):
        (config.run_dir / "tasks" / task_id).mkdir(parents=True)
        (config.run_dir / "tasks" / task_id / "result.json").write_bytes(orjson.dumps(
            {"status": "completed", "score": 1.0, "termination_reason": "completed", "stand_ins": stand_ins}))
    (config.run_dir / "config.json").write_bytes(orjson.dumps(config.model_dump(mode="json")))
    with pytest.raises(SummaryError, match="1 result.s. were made with stand-in assets .* task b.*not a scored run"):
        summarize(config.run_dir)


READ_BACK = """
import sys, json
from pathlib import Path
import openpyxl, docx, pptx, pymupdf, cv2, soundfile, zipfile, tarfile, sqlite3
from PIL import Image
from odf.opendocument import load
folder = Path(sys.argv[1])
seen = {}
seen["xlsx"] = openpyxl.load_workbook(folder / "Sales.xlsx").active["A1"].value
seen["xls"] = "xl/workbook.xml" in zipfile.ZipFile(folder / "file.xls").namelist()  # OOXML: LibreOffice opens it
seen["docx"] = docx.Document(folder / "Report.docx").paragraphs[0].text.startswith("hcu stand-in")
seen["pptx"] = len(pptx.Presentation(folder / "Deck.pptx").slides)
seen["pdf"] = pymupdf.open(folder / "paper.pdf").page_count
seen["png"] = Image.open(folder / "logo.png").size
seen["jpg"] = Image.open(folder / "photo.jpg").format
seen["mp4"] = int(cv2.VideoCapture(str(folder / "clip.mp4")).get(cv2.CAP_PROP_FRAME_COUNT))
seen["mp3"] = soundfile.info(str(folder / "song.mp3")).frames > 0
seen["ods"] = len(load(str(folder / "sheet.ods")).spreadsheet.childNodes)
seen["zip"] = zipfile.ZipFile(folder / "book.zip").namelist()
seen["profile"] = sorted(tarfile.open(folder / "thunderbird-profile.tar.gz").getnames())
seen["xcf"] = (folder / "image.xcf").read_bytes()[:14].decode()
seen["history"] = sorted(r[0] for r in sqlite3.connect(folder / "history_new.sqlite").execute(
    "select name from sqlite_master where type='table'"))
print(json.dumps(seen))
"""


def test_stand_ins_of_every_type_are_read_back_by_osworlds_libraries(tmp_path: Path, evaluator_python: Path) -> None:
    names = ["Sales.xlsx", "file.xls", "Report.docx", "Deck.pptx", "paper.pdf", "logo.png", "photo.jpg", "clip.mp4",
             "song.mp3", "sheet.ods", "book.zip", "thunderbird-profile.tar.gz", "image.xcf", "history_new.sqlite"]
    generate(evaluator_python, tmp_path, dict.fromkeys(names, []))
    done = subprocess.run([str(evaluator_python), "-c", READ_BACK, str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "xlsx": "Item", "xls": True, "docx": True, "pptx": 2, "pdf": 1, "png": [320, 200], "jpg": "JPEG",
        "mp4": 30, "mp3": True, "ods": 1, "zip": ["book/", "book/README.txt"],
        "profile": [".thunderbird", ".thunderbird/installs.ini", ".thunderbird/profiles.ini",
                    ".thunderbird/t5q2a5hp.default-release", ".thunderbird/t5q2a5hp.default-release/prefs.js"],
        "xcf": "gimp xcf file\x00", "history": ["meta", "sqlite_sequence", "urls", "visits"]}
    a, b = (tmp_path / "Sales.xlsx").read_bytes(), (tmp_path / "file.xls").read_bytes()
    assert a != b, "stand-ins differ by URL: a task's input never equals its expected file by accident"
    with tarfile.open(tmp_path / "thunderbird-profile.tar.gz") as archive:
        profiles = archive.extractfile(".thunderbird/profiles.ini").read().decode()
    assert "Default=t5q2a5hp.default-release" in profiles.split("[Profile0]")[0]  # the installation's profile


def test_an_archive_holds_what_the_task_names_inside_it() -> None:
    book = load_task("v1", "5df7b33a-9f77-4101-823e-02f863e1c1ae", "multi_apps", OFFICIAL_TASKS)
    members = {url.rsplit("/", 1)[1]: names for url, names in archive_members(book).items()}
    # unzipped into ~/Desktop, then setup opens book/Spectral Graph Theory.pdf; the gold of compare_archive
    # (file_type pdf, no file_path) holds a PDF at its top
    assert members == {"raw_book.zip": ["book/", "book/Spectral Graph Theory.pdf"], "book.zip": ["book.pdf"]}
    exam = load_task("v1", "aceb0368-56b8-4073-b70e-3dc9aee184e0", "multi_apps", OFFICIAL_TASKS)
    assert list(archive_members(exam).values()) == [["exam/ReferenceAnswers.docx", "exam/grades.xlsx", "exam/"]]
    slides = load_task("v1", "0e5303d4-8820-42f6-b18d-daf7e633de21", "multi_apps", OFFICIAL_TASKS)
    assert list(archive_members(slides).values()) == [["lecture_slides/lecture_slides.pdf"]]  # its file_path
    calc = load_task("v1", "4e6fcf72-daf3-439f-a232-c434ce416af6", "libreoffice_calc", OFFICIAL_TASKS)
    assert archive_members(calc) == {}


DEEPER = """
import sys, json, subprocess, zipfile
from pathlib import Path
import numpy as np, openpyxl
from PIL import Image
from mutagen.easyid3 import EasyID3
from desktop_env.evaluators.metrics.slides import check_page_number_colors
from desktop_env.evaluators.metrics.general import check_direct_json_object
folder = Path(sys.argv[1])
seen = {}
seen["id3"] = dict(EasyID3(folder / "Artist - Title.mp3"))  # a tag, blank
seen["sheets"] = openpyxl.load_workbook(folder / "Sales.xlsx").sheetnames
seen["page_number_color"] = check_page_number_colors(str(folder / "Deck.pptx"), {"color": "red"})
out = subprocess.run([sys.executable, str(folder / "script.py")], capture_output=True, text=True).stdout
seen["script"] = sorted(json.loads(out))
seen["script_scored"] = check_direct_json_object(out, {"expected": {"a": "b"}})
raw = (folder / "image.xcf").read_bytes()
pixels = np.frombuffer(raw[-64 * 64 * 3:], dtype=np.uint8).reshape(64, 64, 3)
seen["xcf_colors"] = len(np.unique(pixels.reshape(-1, 3), axis=0))
Image.fromarray(pixels).save(folder / "exported.png")  # what GIMP exports of it
from desktop_env.evaluators.metrics.gimp import check_triangle_position
seen["triangle_centred"] = check_triangle_position(str(folder / "exported.png"))
from desktop_env.evaluators.metrics.gimp import check_textbox_on_leftside
seen["dark_on_the_left"] = check_textbox_on_leftside(str(folder / "exported.png"))
seen["zip"] = zipfile.ZipFile(folder / "book.zip").namelist()
seen["gold"] = zipfile.ZipFile(folder / "gold_slides.zip").namelist()
done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target",
                       str(folder / "site"), str(folder / "cssselect-1.3.0-py3-none-any.whl")],
                      capture_output=True, text=True)
seen["wheel"] = [done.returncode, sorted(p.name for p in (folder / "site").iterdir())]
print(json.dumps(seen))
"""


def test_the_gold_is_what_the_evaluator_alone_fetches() -> None:
    calc = load_task("v1", "4e6fcf72-daf3-439f-a232-c434ce416af6", "libreoffice_calc", OFFICIAL_TASKS)
    assert expected_files(calc) == {  # postconfig downloads it after the agent
        f"{HF}/libreoffice_calc/4e6fcf72-daf3-439f-a232-c434ce416af6/Employee_Age_By_Birthday_gold.xlsx"}
    trains = load_task("v1", "6f81754e-285d-4ce0-b59e-af7edb02d108", "libreoffice_writer", OFFICIAL_TASKS)
    # the expected getter fetches the gold and the original; the original is setup's input, so it stays one
    assert expected_files(trains) == {f"{HF}/libreoffice_writer/6f81754e-285d-4ce0-b59e-af7edb02d108/"
                                      "HK_train_record_Gold.docx"}


def test_a_chrome_history_stand_in_carries_the_schema_version_chrome_keeps(tmp_path: Path) -> None:
    import sqlite3

    from hcu.osworld.stand_ins.files import make

    make(f"{HF}/chrome/t/history_empty.sqlite", ["history_new.sqlite"], str(tmp_path / "History"))
    with sqlite3.connect(tmp_path / "History") as db:  # without a version Chrome razes it, setup's history too
        meta = dict(db.execute("select key, value from meta"))
        columns = {row[1] for row in db.execute("pragma table_info(visits)")}
    assert meta == {"version": "70", "last_compatible_version": "16"}
    assert {"visit_duration", "is_known_to_sync", "visited_link_id"} <= columns


UNTOUCHED = """
import sys, json, logging
from pathlib import Path
logging.disable(logging.CRITICAL)
import openpyxl
from desktop_env.evaluators import metrics
from hcu.osworld.stand_ins.files import make
folder, hf = Path(sys.argv[1]), sys.argv[2]
def made(name, role="input"):
    make(f"{hf}/t/{role}/{name}", [name], str(folder / f"{role}-{name}"), role=role)
    return str(folder / f"{role}-{name}")
doc, gold_doc = made("report.docx"), made("report_gold.docx", "expected")
book, gold_book = made("sales.xlsx"), made("sales_gt.xlsx", "expected")
pivots = {"type": "pivot_table", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2",
          "pivot_props": ["col_fields", "filter", "row_fields", "data_fields"]}
charts = {"type": "chart", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2", "chart_props": ["type", "title"]}
seen = {
    "tables": metrics.compare_docx_tables(doc, gold_doc), "images": metrics.compare_docx_images(doc, gold_doc),
    "references": metrics.compare_references(doc, gold_doc, content_only=True, reference_base_result=0.6),
    "lines": metrics.compare_unique_train_records(doc, [gold_doc, doc]),
    "pivots": metrics.compare_table(book, gold_book, rules=[pivots]),
    "charts": metrics.compare_table(book, gold_book, rules=[charts]),
    "image structure": metrics.check_structure_sim(made("dog.png"), made("dog_gold.png", "expected")),
    "gold pivots and charts": metrics.compare_table(gold_book, gold_book, rules=[pivots, charts]),
    "gold sheets": openpyxl.load_workbook(gold_book).sheetnames,
}
print(json.dumps(seen))
"""


def test_stand_ins_hold_what_official_metrics_read_in_them(tmp_path: Path, evaluator_python: Path) -> None:
    files = {"Artist - Title.mp3": [], "Sales.xlsx": [], "Deck.pptx": [], "script.py": [], "image.xcf": [],
             "cssselect-1.3.0-py3-none-any.whl": [], "book.zip": ["book/", "book/Chapter 1.pdf"],
             "gold_slides.zip": ["slides/slides.pdf"]}
    generate(evaluator_python, tmp_path, files)
    done = subprocess.run([str(evaluator_python), "-c", DEEPER, str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "id3": {}, "sheets": ["Sheet1", "Sheet2"],
        "page_number_color": 0,  # the master's colours are sRGB ones (the metric indexes them), not red
        "script": ["stand_in", "value"], "script_scored": 0.0,  # its output parses as JSON, and scores nothing
        "xcf_colors": 3, "triangle_centred": 0.0,  # a shape off-centre: metrics that find it by colour see so
        "dark_on_the_left": 0.0,
        "zip": ["book/", "book/Chapter 1.pdf"], "gold": ["slides/", "slides/slides.pdf"],
        "wheel": [0, ["cssselect", "cssselect-1.3.0.dist-info"]]}
    with zipfile.ZipFile(tmp_path / "book.zip") as archive:
        assert archive.read("book/Chapter 1.pdf").startswith(b"%PDF")  # each member a stand-in of its own type


def test_an_untouched_input_does_not_match_its_gold_stand_in_in_structure(tmp_path: Path,
                                                                          evaluator_python: Path) -> None:
    """OSWorld's metrics that compare only structure (tables, images, references, line count, pivot tables,
    charts, an image's SSIM) score an untouched input 0 against its gold stand-in."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([str(evaluator_python), "-c", UNTOUCHED, str(tmp_path), HF], capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = orjson.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"tables": 0, "images": 0, "references": 0, "lines": 0, "pivots": 0.0, "charts": 0.0,
                    "image structure": 0.0, "gold pivots and charts": 1.0, "gold sheets": ["Sheet1", "Sheet2"]}
