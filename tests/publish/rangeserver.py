"""``python rangeserver.py PORT DIR``: ``python -m http.server`` with byte ranges (``Range:
bytes=A-B``, answered ``206``), as static web servers and object stores serve files. Readers
that fetch a Parquet file's footer first (Polars' object store) need them; ``http.server``
alone always sends the whole file."""

from __future__ import annotations

import http.server
import os
import re
import sys
from functools import partial

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        match = _RANGE.match(self.headers.get("Range", ""))
        path = self.translate_path(self.path)
        if match is None or not os.path.isfile(path):
            super().do_GET()
            return
        size = os.path.getsize(path)
        first, last = match.groups()
        if first:
            start, end = int(first), min(int(last) if last else size - 1, size - 1)
        else:
            start, end = max(0, size - int(last)), size - 1
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(end - start + 1)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    port, folder = int(sys.argv[1]), sys.argv[2]
    handler = partial(RangeHandler, directory=folder)
    http.server.ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()
