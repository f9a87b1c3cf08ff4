"""A helper process of ``test_tags.py`` (not a test): creates tags in rounds, in step with the
test, so that two processes create the same tag at the same moment.

Usage: ``python tag_race_worker.py REGISTRY SYNC_DIR WORKER_ID ROUNDS VIEW``
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import dsreg


def main() -> None:
    reg_path, sync_dir, wid, rounds, view = sys.argv[1:6]
    reg = dsreg.find_registry(reg_path)
    sync = Path(sync_dir)
    for r in range(int(rounds)):
        (sync / f"ready-{r}-{wid}").touch()
        while not (sync / f"go-{r}").exists():
            time.sleep(0.0002)
        try:
            res = dsreg.tag(f"ds@race-{r}", "ds@original", view=view, registry=reg)
            print(json.dumps({"round": r, "ok": True, "revision": res.revision}), flush=True)
        except dsreg.TagExistsError:
            print(json.dumps({"round": r, "ok": False}), flush=True)


if __name__ == "__main__":
    main()
