"""Where a running ``durable dev`` says where it is, for the CLI to find it.

Each dev writes ``.durable/dev.json`` in its folder (its API, its DynamoDB, its key file,
its time scale) and the same into the install cache as the newest dev on this machine.
The CLI reads its folder's file first; from another folder (a second terminal elsewhere)
it takes the newest dev while that process lives, instead of guessing the default port.
Standard library only: the CLI imports this without the local stack's dependencies.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from durable.local.servers.dynamodb_local import local_home

NAME = "dev.json"


def last_dev_file() -> Path:
    return local_home() / "last-dev.json"


def folder_dev(state_dir: Path) -> dict[str, Any] | None:
    """This folder's dev only (what reads its ledger, as ``durable check-deploy`` does,
    must never meet another project's)."""
    here = state_dir / NAME
    return dict(json.loads(here.read_text())) if here.exists() else None


def running_dev(state_dir: Path) -> dict[str, Any] | None:
    """This folder's dev, else the newest on the machine while its process lives: the
    process id alive and started when the dev's did (an id reused after a crash or a
    reboot is another process)."""
    here = folder_dev(state_dir)
    if here is not None:
        return here
    try:
        last = dict(json.loads(last_dev_file().read_text()))
        pid = int(last["pid"])
        os.kill(pid, 0)  # signal 0: is it alive (and ours to signal)?
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if last.get("started") != _started(pid):
        return None
    return last


def _started(pid: int) -> str | None:
    """When process ``pid`` started, as the kernel counts (Linux); None elsewhere, where
    the process id alone is trusted."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: count from the ")" that ends it.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def write(state_dir: Path, info: dict[str, Any]) -> None:
    (state_dir / NAME).write_text(json.dumps(info))
    try:
        last = last_dev_file()
        last.parent.mkdir(parents=True, exist_ok=True)
        started = _started(int(info["pid"])) if "pid" in info else None
        last.write_text(
            json.dumps({**info, "state_dir": str(state_dir.resolve()), "started": started})
        )
    except OSError:  # a read-only cache: the CLI in this folder still finds it
        pass


def remove(state_dir: Path) -> None:
    (state_dir / NAME).unlink(missing_ok=True)
    try:
        if json.loads(last_dev_file().read_text()).get("pid") == os.getpid():
            last_dev_file().unlink(missing_ok=True)
    except (OSError, ValueError):
        pass
