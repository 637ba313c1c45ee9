"""Stand-in archives (zip, tar, EPUB, Python wheels) and the Thunderbird profile archive, in the OSWorld process.

An archive holds the members the task names (plan.archive_members: the files and folders the setup steps
after its unpacking open, or the folder the evaluator's `compare_archive` lists), each a stand-in of its own
type; with no file named, also a folder named after the archive with a README. A wheel is one pip installs: its
dist-info (METADATA, WHEEL, RECORD) comes from the wheel's file name.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import PurePosixPath

THUNDERBIRD_PROFILE = "t5q2a5hp.default-release"
"""The profile folder the official tasks' Thunderbird archives hold (their evaluators read files in it)."""
THUNDERBIRD_INSTALL = "FDC34C9F024745EB"
"""Thunderbird picks the profile its installation's section names (a hash of the install folder; this is the one
of /usr/lib/thunderbird, where Debian's and Ubuntu's packages put it); without it, it makes a profile of its own."""

Render = Callable[[str], bytes]
"""Makes the stand-in content of one member, by its path (its suffix says the type)."""


def contents(name: str, label: str, members: list[str], render: Render) -> dict[str, bytes | None]:
    """Member path -> content (None: a folder), folders before what they hold."""
    found: dict[str, bytes | None] = {}
    if "thunderbird" in name.lower():
        found.update({".thunderbird": None, f".thunderbird/{THUNDERBIRD_PROFILE}": None,
                      ".thunderbird/profiles.ini": _PROFILES_INI.encode(),
                      ".thunderbird/installs.ini": _INSTALLS_INI.encode(),
                      f".thunderbird/{THUNDERBIRD_PROFILE}/prefs.js": _THUNDERBIRD_PREFS.encode()})
    elif all(member.endswith("/") for member in members):  # no file named: one of the archive's own
        stem = PurePosixPath(name).name.split(".")[0] or "stand-in"
        members = [*members, f"{stem}/README.txt"]
    for member in members:
        path = PurePosixPath(member.strip("/"))
        for parent in reversed(path.parents[:-1]):
            found.setdefault(str(parent), None)
        if str(path) != ".":
            found.setdefault(str(path), None if member.endswith("/") else render(str(path)))
    if not found:
        found = {"README.txt": f"{label}\n".encode()}
    return found


def write_zip(path: str, members: dict[str, bytes | None]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            if content is None:
                archive.writestr(f"{member}/", b"")
            else:
                archive.writestr(member, content)


def write_tar(path: str, members: dict[str, bytes | None]) -> None:
    mode = {".xz": "w:xz", ".txz": "w:xz", ".gz": "w:gz", ".tgz": "w:gz", ".bz2": "w:bz2"}.get(
        PurePosixPath(path).suffix.lower(), "w")
    with tarfile.open(path, mode) as archive:
        for member, content in members.items():
            info = tarfile.TarInfo(member)
            info.mode = 0o755 if content is None else 0o644
            if content is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            else:
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))


def write_epub(path: str, label: str) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/container.xml", _EPUB_CONTAINER)
        archive.writestr("content.opf", _EPUB_OPF.format(title=label))
        archive.writestr("chapter.xhtml", _EPUB_CHAPTER.format(title=label))


def write_wheel(path: str, name: str, label: str) -> None:
    """A wheel pip installs: `{distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl` gives the
    dist-info folder and its METADATA and WHEEL; the package is one module saying it is a stand-in."""
    parts = PurePosixPath(name).name.removesuffix(".whl").split("-")
    distribution, version = (parts[0], parts[1]) if len(parts) >= 2 else ("stand_in", "0.0.0")
    tags = "-".join(parts[-3:]) if len(parts) >= 5 else "py3-none-any"
    module = distribution.lower().replace("-", "_").replace(".", "_")
    info = f"{distribution}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'"""{label}"""\n\n__version__ = "{version}"\n'.encode(),
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
                             f"Summary: {label}\n").encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: hcu\nRoot-Is-Purelib: true\nTag: {tags}\n".encode(),
    }
    record = "".join(f"{member},sha256={_digest(content)},{len(content)}\n" for member, content in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, content in files.items():
            archive.writestr(member, content)


def _digest(content: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()


_INSTALL_SECTION = f"""Default={THUNDERBIRD_PROFILE}
Locked=1
"""
_INSTALLS_INI = f"[{THUNDERBIRD_INSTALL}]\n{_INSTALL_SECTION}"
_PROFILES_INI = f"""[Install{THUNDERBIRD_INSTALL}]
{_INSTALL_SECTION}
[Profile0]
Name=default-release
IsRelative=1
Path={THUNDERBIRD_PROFILE}
Default=1

[General]
StartWithLastProfile=1
Version=2
"""
_THUNDERBIRD_PREFS = "".join(f'user_pref("{key}", {json.dumps(value)});\n' for key, value in {
    # one account, Local Folders (the tasks' real profiles hold mail accounts besides it)
    "mail.accountmanager.accounts": "account1", "mail.accountmanager.localfoldersserver": "server1",
    "mail.account.account1.server": "server1", "mail.server.server1.type": "none",
    "mail.server.server1.hostname": "Local Folders", "mail.server.server1.name": "Local Folders",
    "mail.server.server1.userName": "nobody", "mail.server.server1.directory-rel": "[ProfD]Mail/Local Folders",
}.items())
_EPUB_CONTAINER = ('<?xml version="1.0"?><container version="1.0" '
                   'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                   '<rootfile full-path="content.opf" media-type="application/oebps-package+xml"/>'
                   "</rootfiles></container>")
_EPUB_OPF = ('<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
             'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
             '<dc:identifier id="id">hcu-stand-in</dc:identifier><dc:title>{title}</dc:title>'
             "<dc:language>en</dc:language></metadata><manifest>"
             '<item id="c1" href="chapter.xhtml" media-type="application/xhtml+xml"/></manifest>'
             '<spine><itemref idref="c1"/></spine></package>')
_EPUB_CHAPTER = ('<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}</title>'
                 "</head><body><p>{title}</p></body></html>")
