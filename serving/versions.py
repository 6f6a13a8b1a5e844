"""Which version of a model ds2-serve serves: the newest under the model base path, polled for newer ones.

ds2-serve serves the newest version under the model base path and polls the folder (TF Serving's
`--file_system_poll_wait_seconds`): a newer version is loaded and warmed up (its
assets.extra/tf_serving_warmup_requests) while the old one keeps serving, then swapped in; one that fails
to load is logged once and the old one stays, and it is tried again on a poll once its folder's files
changed (a copy still in progress) or every `RETRY_SECONDS`. Only folders named by ASCII digits are
versions. Requests that name a version get that version or INVALID_ARGUMENT (only the newest is kept
loaded, TF Serving's default policy).

Loading a version runs its graph as the server's user, so the base path must be writable by that user alone
(`base_path_warnings`).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tensorflow_serving.apis import get_model_status_pb2, model_pb2

from deepspeech2_serving.checks import invalid
from deepspeech2_serving.servable import Servable

logger = logging.getLogger(__name__)

RETRY_SECONDS = 60.0  # a version that failed to load is tried again this often even if its folder didn't change
VERSION_NAME = re.compile(r"[0-9]+")  # ASCII digits only: "²".isdigit() is true, int("²") fails


def latest_version(base_path: Path) -> int | None:
    """The newest complete version under a model base path (a folder named by ASCII digits, with a saved_model.pb)."""
    if not base_path.is_dir():
        return None
    found = [int(p.name) for p in base_path.iterdir()
             if VERSION_NAME.fullmatch(p.name) and p.is_dir() and (p / "saved_model.pb").is_file()]
    return max(found, default=None)


def _fingerprint(folder: Path) -> tuple | None:
    """The files under `folder` with their sizes and mtimes: it changes while a copy is in progress."""
    try:
        return tuple(sorted((str(p.relative_to(folder)), st.st_size, st.st_mtime_ns)
                            for p in folder.rglob("*") if p.is_file() for st in (p.stat(),)))
    except OSError:  # a file went away while we looked: the folder is changing
        return None


def base_path_warnings(base: Path) -> list[str]:
    """Why the model base path is unsafe to serve from, one line each: loading a version runs its graph (and a
    SavedModel can hold any op, file and network ones included) as the server's user, so whoever may write there
    may run code as that user. The base path and its version folders must be writable by no one but the server's
    user (or root): not by every user (a sticky bit doesn't help: anyone may still add a version), and not owned by
    another user."""
    problems = []
    me = os.geteuid()
    folders = [base] + sorted(p for p in base.iterdir() if VERSION_NAME.fullmatch(p.name) and p.is_dir())
    for folder in folders:
        st = folder.stat()
        if st.st_mode & stat.S_IWOTH:
            problems.append(f"`{folder}` is writable by every user of this machine: any of them can put a version "
                            f"there, whose graph ds2-serve runs as uid {me}; chmod o-w it (docs/serving.md, "
                            "\"Who may write the model base path\")")
        elif st.st_uid not in (me, 0):
            problems.append(f"`{folder}` belongs to uid {st.st_uid}, not to ds2-serve's uid {me} (or root): its owner "
                            f"can put a version there, whose graph ds2-serve runs as uid {me} (docs/serving.md, "
                            "\"Who may write the model base path\")")
    return problems


class ModelManager:
    """Loads the newest version of one model, polls for newer ones, and says which version serves a request."""

    def __init__(self, base_path: str | Path, name: str, load: Callable[[Path], tuple[Servable, int]],
                 poll_seconds: float = 1.0):
        """
        Args:
            base_path: the folder of versions.
            name: the model name clients ask for.
            load: `load(version_folder) -> (servable, warm-up requests run)`: a version loaded and warmed up.
            poll_seconds: how often `start_polling`'s thread looks for a newer version; 0: never.
        """
        self.name = name
        self.base_path = Path(base_path)
        self.poll_seconds = poll_seconds
        self._load = load
        self._lock = threading.Lock()
        self._servable: Servable | None = None
        self._states: dict[int, int] = {}  # version -> ModelVersionStatus.State
        # version -> (its folder's fingerprint, time.monotonic()) when it last failed to load
        self._failed: dict[int, tuple[tuple | None, float]] = {}
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self.on_load = None  # on_load(servable): called after a new version took over

    @property
    def servable(self) -> Servable | None:
        return self._servable

    def load_latest(self) -> bool:
        """Load the newest version if it is newer than the one serving; True if it changed.

        A version that failed to load is tried again once its folder's files changed (a copy in progress:
        saved_model.pb shows before variables/), or after `RETRY_SECONDS`; its first failure is logged.

        Raises:
            FileNotFoundError, ValueError: the first version can't be loaded (later failures are logged).
        """
        version = latest_version(self.base_path)
        current = self._servable
        if version is None or (current is not None and version <= current.version):
            return False
        folder = self.base_path / str(version)
        fingerprint = _fingerprint(folder)
        if version in self._failed:
            failed_on, failed_at = self._failed[version]
            if fingerprint is not None and fingerprint == failed_on and time.monotonic() - failed_at < RETRY_SECONDS:
                return False
        State = get_model_status_pb2.ModelVersionStatus.State
        with self._lock:
            self._states[version] = State.LOADING
        try:
            servable, count = self._load(folder)
        except Exception as e:
            first = version not in self._failed
            with self._lock:
                self._states[version] = State.END
                self._failed[version] = (fingerprint, time.monotonic())
            if current is None:
                raise
            if first:
                logger.error("version %d of %s failed to load (version %d keeps serving; it is tried again when its "
                             "files change): %s", version, self.name, current.version, e)
            else:
                logger.info("version %d of %s failed to load again: %s", version, self.name, e)
            return False
        if self._failed.pop(version, None) is not None:
            logger.warning("version %d of %s loaded after failing earlier", version, self.name)
        with self._lock:
            self._servable = servable
            self._states[version] = State.AVAILABLE
            if current is not None:
                self._states[current.version] = State.END
        logger.info("serving %s version %d from %s (%d warm-up requests)", self.name, version, servable.path, count)
        if self.on_load is not None:
            self.on_load(servable)
        return True

    def start_polling(self) -> None:
        if self.poll_seconds > 0:
            self._poller = threading.Thread(target=self._poll, name="version-poller", daemon=True)
            self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.load_latest()
            except Exception:  # never let the poller die
                logger.exception("polling %s failed", self.base_path)

    def resolve(self, spec: model_pb2.ModelSpec) -> Servable:
        """The servable for a request's ModelSpec (name, optional version or version label).

        Raises:
            RequestError: INVALID_ARGUMENT for another model name or a version that isn't loaded.
        """
        servable = self._servable
        if spec.name != self.name:
            raise invalid(f"unknown model {spec.name!r}; this server serves {self.name!r}")
        if spec.HasField("version") and spec.version.value != servable.version:
            raise invalid(f"version {spec.version.value} of model {self.name!r} is not loaded; the server has "
                          f"version {servable.version}")
        if spec.version_label:
            raise invalid(f"unknown version label {spec.version_label!r}: ds2-serve has no labels; ask for a version "
                          "number, or for none (the newest)")
        return servable

    def statuses(self, version: int | None) -> list[get_model_status_pb2.ModelVersionStatus]:
        with self._lock:
            states = dict(self._states)
        if version is not None:
            if version not in states:
                raise invalid(f"version {version} of model {self.name!r} was never loaded; loaded: {sorted(states)}")
            states = {version: states[version]}
        return [get_model_status_pb2.ModelVersionStatus(version=v, state=s) for v, s in sorted(states.items())]


__all__ = ["RETRY_SECONDS", "VERSION_NAME", "ModelManager", "base_path_warnings", "latest_version"]
