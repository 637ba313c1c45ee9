"""python -m hcu.osworld.stand_ins.generate: make stand-in files, in the OSWorld interpreter (whose libraries
write and read them: openpyxl, python-docx, python-pptx, PyMuPDF, Pillow, OpenCV, soundfile). Reads a JSON list
of jobs (plan.missing) on stdin, writes each file atomically, prints one JSON line per file made."""

from __future__ import annotations

import json
import sys

from hcu.osworld.stand_ins import files


def main() -> None:
    for job in json.load(sys.stdin):
        made = files.make(job["url"], job["names"], job["target"], job["members"], job["role"])
        print(json.dumps({"url": job["url"], **made}), flush=True)


if __name__ == "__main__":
    main()
