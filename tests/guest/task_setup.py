"""Replays an official task's setup steps through the in-guest API, as OSWorld's SetupController sends them
(same endpoints, same bodies, placeholders filled the same way). The files its `download` steps would fetch
from Hugging Face are replaced by small files made here of the same type: these tests have no internet and
check the applications, not the task data."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import PurePosixPath
from typing import Any

import requests
from PIL import Image

from hcu.osworld.guest.lifecycle import Guest

ENDPOINTS = {
    "launch": "/setup/launch",
    "open": "/setup/open_file",
    "activate_window": "/setup/activate_window",
    "execute": "/setup/execute",
    "command": "/setup/execute",
}
SCREEN = {"SCREEN_WIDTH": 1920, "SCREEN_HEIGHT": 1080, "SCREEN_WIDTH_HALF": 960, "SCREEN_HEIGHT_HALF": 540}
STEP_TIMEOUT = (5, 180)
THUNDERBIRD_PROFILES_INI = """[Profile0]
Name=default-release
IsRelative=1
Path=t5q2a5hp.default-release
Default=1

[General]
StartWithLastProfile=1
Version=2
"""


def _fill(value: Any, password: str) -> Any:
    """The task's `{SCREEN_WIDTH_HALF}`-style placeholders and `{CLIENT_PASSWORD}` filled, at any depth."""
    if isinstance(value, dict):
        return {key: _fill(item, password) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, password) for item in value]
    if isinstance(value, str):
        for name, number in SCREEN.items():
            value = value.replace("{" + name + "}", str(number))
        return value.replace("{CLIENT_PASSWORD}", password)
    return value


def _tar_gz(members: dict[str, bytes | None]) -> bytes:
    """A .tar.gz of `members` (path -> content; None makes a directory)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                archive.addfile(info)
            else:
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


OOXML_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
OOXML_TYPES = "application/vnd.openxmlformats-officedocument"


def _ooxml(parts: dict[str, tuple[str, str]]) -> bytes:
    """An Office Open XML package (.docx, .xlsx) of `parts` (name -> (content type, XML)); the first part is
    the main document. Relationship parts (`*.rels`) take the content type "" (their default)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        main_part = next(iter(parts))
        overrides = "".join(f'<Override PartName="/{name}" ContentType="{kind}"/>'
                            for name, (kind, _) in parts.items() if kind)
        package.writestr("[Content_Types].xml", (
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            f'<Default Extension="xml" ContentType="application/xml"/>{overrides}</Types>'))
        package.writestr("_rels/.rels", (
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{OOXML_RELS}/officeDocument" Target="{main_part}"/></Relationships>'))
        for name, (_, xml) in parts.items():
            package.writestr(name, xml)
    return buffer.getvalue()


def _docx(text: str) -> bytes:
    body = (f'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
            f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:body></w:document>")
    return _ooxml({"word/document.xml": (f"{OOXML_TYPES}.wordprocessingml.document.main+xml", body)})


def _xlsx(label: str, number: int) -> bytes:
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    workbook = (f'<workbook xmlns="{main}" xmlns:r="{OOXML_RELS}"><sheets>'
                '<sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>')
    workbook_rels = ('<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
                     f'<Relationship Id="rId1" Type="{OOXML_RELS}/worksheet" Target="worksheets/sheet1.xml"/>'
                     "</Relationships>")
    sheet = (f'<worksheet xmlns="{main}"><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>{label}</t></is>'
             f'</c><c r="B1"><v>{number}</v></c></row></sheetData></worksheet>')
    return _ooxml({
        "xl/workbook.xml": (f"{OOXML_TYPES}.spreadsheetml.sheet.main+xml", workbook),
        "xl/_rels/workbook.xml.rels": ("", workbook_rels),
        "xl/worksheets/sheet1.xml": (f"{OOXML_TYPES}.spreadsheetml.worksheet+xml", sheet),
    })


def _pdf(title: str) -> bytes:
    """A one-page PDF whose document title is `title` (viewers show it in the window title)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>", f"<< /Title ({title}) >>".encode()]
    body, offsets = b"%PDF-1.4\n", []
    for number, content in enumerate(objects, 1):
        offsets.append(len(body))
        body += b"%d 0 obj\n%s\nendobj\n" % (number, content)
    xref = b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return body + (b"xref\n0 %d\n0000000000 65535 f \n%strailer\n<< /Size %d /Root 1 0 R /Info 4 0 R >>\n"
                   b"startxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref, len(objects) + 1, len(body)))


def stand_in(guest_path: str) -> bytes:
    """A small valid file of the type `guest_path` names (what the task would have downloaded there)."""
    path = PurePosixPath(guest_path)
    if path.suffix in (".png", ".jpg", ".jpeg"):
        buffer = io.BytesIO()
        Image.new("RGB", (320, 200), (200, 60, 40)).save(buffer, "PNG" if path.suffix == ".png" else "JPEG")
        return buffer.getvalue()
    if path.suffix == ".xlsx":
        return _xlsx("stand-in", 42)
    if path.suffix == ".docx":
        return _docx("A stand-in document made by the hcu tests.")
    if path.suffix == ".pdf":
        return _pdf(f"Stand-in for {path.stem}")
    if path.name == "thunderbird-profile.tar.gz":  # an empty profile where the tasks' profile unpacks
        return _tar_gz({".thunderbird": None, ".thunderbird/t5q2a5hp.default-release": None,
                        ".thunderbird/profiles.ini": THUNDERBIRD_PROFILES_INI.encode()})
    raise AssertionError(f"no stand-in for a downloaded {path.name}: add one to tests/guest/task_setup.py")


def replay_setup(guest: Guest, task: dict[str, Any]) -> None:
    """Send each setup step of `task` to the guest; a step the guest does not answer with success fails."""
    for step in task["config"]:
        kind, parameters = step["type"], step["parameters"]
        if kind == "sleep":
            continue  # the tests poll for what the sleep waited for
        if kind == "download":
            for file in parameters["files"]:
                response = requests.post(guest.api_url() + "/setup/upload", data={"file_path": file["path"]},
                                         files={"file_data": ("file", stand_in(file["path"]))}, timeout=STEP_TIMEOUT)
                assert response.status_code == 200, f"upload of {file['path']}: HTTP {response.status_code}"
            continue
        if kind not in ENDPOINTS:
            raise AssertionError(f"no replay for setup step {kind!r}")
        body = _fill(parameters, guest.spec.client_password)
        response = requests.post(guest.api_url() + ENDPOINTS[kind], json=body, timeout=STEP_TIMEOUT)
        assert response.status_code == 200, f"{kind} {body}: HTTP {response.status_code} {response.text[:300]}"
        if ENDPOINTS[kind] == "/setup/execute":
            assert response.json()["returncode"] == 0, f"{kind} {body}: {response.json()}"
