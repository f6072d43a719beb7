"""The mid-write kill of ``tools/chaos.py``: copied as ``sitecustomize.py`` into a temporary folder that goes first
on a job's ``PYTHONPATH``, so every Python process of the job (the script, a launcher, its workers, torchrun's
ranks) imports it at start-up. Test instrumentation only: no lesson or job imports it.

Without ``CHAOS_CTL`` in the environment it does nothing. With it, it wraps the writers the course's jobs use, and
for every write into the job's folder (``CHAOS_FOLDER``) it appends a line to ``$CHAOS_CTL/writes.log``. Once the
controller has armed it (the file ``$CHAOS_CTL/arm`` holds ``j``), the ``j + 1``-th such write from then on, in
whichever process of the job (claimed with ``O_EXCL`` files, so exactly one), is left as a kill in the middle of
that write would leave it, and the process kills itself with ``SIGKILL``. What each writer leaves, and why that is
what a real kill can leave (the reasoning is in ``tools/chaos.py``'s docstring):

* ``open(path, "w"/"a"/"x"...)`` (JSON metadata, logs, ``Path.write_text``): the file written in place, cut at the
  size it had when opened (0, or the old size for ``"a"``) or at a page boundary (4096 bytes) of what was added.
* Keras ``saving_lib.save_model`` (``model.save``, ``.keras``), ``saving_lib.save_weights_only`` (``save_weights``,
  ``.weights.h5``) and ``torch.save(obj, path)``: written in place, cut at a random byte.
* TensorFlow's ``CheckpointManager.save`` and ``Checkpoint._write`` (``write``): never a truncated final file that
  TensorFlow itself could not leave; one of its real intermediate states, chosen at random (``TF_STAGES``).
"""

import builtins
import glob
import importlib.abc
import importlib.machinery
import importlib.util
import io
import json
import os
import random
import signal
import sys
import threading
import time
import uuid

CTL = os.environ.get("CHAOS_CTL", "")
FOLDER = os.path.realpath(os.environ["CHAOS_FOLDER"]) if os.environ.get("CHAOS_FOLDER") else ""
PAGE = 4096
WRITE_MODES = "wax"
#: TensorFlow checkpoint states a kill can leave (tensor_bundle.cc's BundleWriter and MergeBundles, then
#: CheckpointManager's state file and sweep), by the step the kill interrupts.
TF_STAGES = {
    "shard data": "the shard's data file half-written under <prefix>_temp/ (.tempstate name)",
    "shard index": "the shard's data complete, its index half-written (.tempstate name)",
    "merged index": "the data renamed to <prefix>.data-*, <prefix>.index half-written in place",
    "state not updated": "the new checkpoint complete, the 'checkpoint' state file still the old one",
    "state temp": "the state file's atomic write interrupted: a partial checkpoint.tmp<hex>, the old state",
    "sweep": "the new state written, the previous checkpoint's files partly deleted",
}
_real_open = builtins.open
_local = threading.local()
_rng = random.Random(os.environ.get("CHAOS_SEED"))   # the controller's seed: the same cuts again


def _depth() -> int:
    return getattr(_local, "depth", 0)


class _Inside:
    """Writes made inside a wrapped writer belong to it (Keras's save_model opens its path itself)."""

    def __enter__(self):
        _local.depth = _depth() + 1

    def __exit__(self, *exc):
        _local.depth = _depth() - 1


def _path(target):
    """The absolute path of a write target inside the job's folder, else None (file objects, other folders)."""
    if not FOLDER or not isinstance(target, (str, bytes, os.PathLike)):
        return None
    try:
        path = os.path.realpath(os.fsdecode(target))
    except (TypeError, ValueError):
        return None
    return path if path == FOLDER or path.startswith(FOLDER + os.sep) else None


def _note(kind, writer, path, **info):
    """One JSON line in writes.log (a single O_APPEND write: lines from several processes never mix)."""
    line = json.dumps(dict(kind=kind, writer=writer, path=os.path.relpath(path, FOLDER), pid=os.getpid(),
                           t=time.time(), **info)) + "\n"
    fd = os.open(os.path.join(CTL, "writes.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _claim() -> bool:
    """True for the one write to kill: armed (``arm`` holds the skip count j) and the j + 1-th write since."""
    try:
        with _real_open(os.path.join(CTL, "arm")) as f:
            skip = int(f.read())
    except (OSError, ValueError):
        return False
    for k in range(skip + 1):
        try:
            os.close(os.open(os.path.join(CTL, f"hit-{k}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            continue
        return k == skip
    return False


def _die(writer, path, **info):
    _note("fired", writer, path, **info)
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # pragma: no cover - SIGKILL cannot be caught


def _cut(path, start=0):
    """Cut ``path`` to a random size in [start, size): a write of its bytes after ``start`` stopped midway."""
    size = os.path.getsize(path)
    cut = _rng.randrange(start, size) if size > start else start
    os.truncate(path, cut)
    return dict(cut=cut, size=size)


# --------------------------------------------------------------------------- open()

class _KillOnClose:
    """The chosen ``open()`` write: the job writes through it; on close the file is cut and the process killed."""

    def __init__(self, f, path, start):
        self._f, self._path, self._start = f, path, start

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __iter__(self):
        return iter(self._f)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):   # open(path, "w").write(...): closed when dropped
        if not self._f.closed:
            self.close()

    def close(self):
        self._f.close()
        size = os.path.getsize(self._path)
        # A kill stops a write at the size the file had when it was opened (O_TRUNC done, nothing written) or
        # between pages: Linux checks for a fatal signal between the pages of a write(2).
        cuts = [self._start] + list(range((self._start // PAGE + 1) * PAGE, size, PAGE))
        cut = _rng.choice(cuts)
        os.truncate(self._path, cut)
        _die("open", self._path, cut=cut, size=size)


def _open(file, mode="r", *args, **kwargs):
    path = _path(file) if isinstance(mode, str) and any(c in mode for c in WRITE_MODES) and not _depth() else None
    if path is None:
        return _real_open(file, mode, *args, **kwargs)
    start = os.path.getsize(path) if "a" in mode and os.path.exists(path) else 0
    _note("write", "open", path, mode=mode)
    chosen = _claim()
    f = _real_open(file, mode, *args, **kwargs)
    return _KillOnClose(f, path, start) if chosen else f


# --------------------------------------------------------------------------- in-place writers (Keras, torch)

def _in_place(writer, func, index, keyword):
    """Wrap ``func`` whose argument ``index`` (or ``keyword``) is the path it writes in place."""
    def wrapper(*args, **kwargs):
        target = args[index] if len(args) > index else kwargs.get(keyword)
        path = None if _depth() else _path(target)
        if path is None:
            return func(*args, **kwargs)
        _note("write", writer, path)
        chosen = _claim()
        with _Inside():
            result = func(*args, **kwargs)
        if chosen:
            _die(writer, path, **(_cut(path) if os.path.isfile(path) else {}))
        return result
    wrapper.__wrapped__ = func
    return wrapper


def _patch_keras(module):
    module.save_model = _in_place("keras save_model", module.save_model, 1, "filepath")
    module.save_weights_only = _in_place("keras save_weights", module.save_weights_only, 1, "filepath")


def _patch_torch(module):
    save = _in_place("torch.save", module.save, 1, "f")
    module.save = save
    module.serialization.save = save


# --------------------------------------------------------------------------- TensorFlow checkpoints

def _tf_leave(prefix, stage):
    """Make the files of the complete checkpoint ``prefix`` look as a kill at ``stage`` leaves them."""
    data, index = sorted(glob.glob(prefix + ".data-*")), prefix + ".index"
    shard = os.path.join(prefix + "_temp", "part-00000-of-00001")
    if stage in ("shard data", "shard index", "merged index"):
        os.makedirs(prefix + "_temp", exist_ok=True)
    if stage == "shard data":
        with _real_open(data[0], "rb") as f:
            blob = f.read()
        with _real_open(f"{shard}.data-00000-of-00001.tempstate{_rng.getrandbits(63)}", "wb") as f:
            f.write(blob[:_rng.randrange(len(blob)) if blob else 0])
        for p in data + [index]:
            os.remove(p)
    elif stage == "shard index":
        os.replace(data[0], f"{shard}.data-00000-of-00001")
        with _real_open(index, "rb") as f:
            blob = f.read()
        with _real_open(f"{shard}.index.tempstate{_rng.getrandbits(63)}", "wb") as f:
            f.write(blob[:_rng.randrange(len(blob)) if blob else 0])
        os.remove(index)
    elif stage == "merged index":
        with _real_open(index, "rb") as f, _real_open(f"{shard}.index", "wb") as g:
            g.write(f.read())   # the shard's own index, still there until the merge ends
        _cut(index)
    elif stage == "state temp":
        state = os.path.join(os.path.dirname(prefix), "checkpoint")
        old = b""
        if os.path.exists(state):
            with _real_open(state, "rb") as f:
                old = f.read()
        with _real_open(f"{state}.tmp{uuid.uuid4().hex}", "wb") as f:
            f.write(old[:_rng.randrange(len(old) + 1)])


def _patch_tf_checkpoint(module):
    real_write = module.Checkpoint._write

    def _write(self, file_prefix, *args, **kwargs):
        named = isinstance(file_prefix, (str, bytes, os.PathLike))
        path = None if _depth() or not named else _path(os.path.dirname(os.fsdecode(file_prefix)) or ".")
        if path is None:
            return real_write(self, file_prefix, *args, **kwargs)
        _note("write", "tf Checkpoint.write", path)
        chosen = _claim()
        with _Inside():
            result = real_write(self, file_prefix, *args, **kwargs)
        if chosen:
            stage = _rng.choice(["shard data", "shard index", "merged index", "state not updated"])
            _tf_leave(os.fsdecode(file_prefix), stage)
            _die("tf Checkpoint.write", path, stage=stage)
        return result

    module.Checkpoint._write = _write


def _patch_tf_manager(module):
    real_save = module.CheckpointManager.save

    def save(self, *args, **kwargs):
        path = None if _depth() else _path(self.directory)
        if path is None:
            return real_save(self, *args, **kwargs)
        _note("write", "tf CheckpointManager.save", path)
        if not _claim():
            with _Inside():
                return real_save(self, *args, **kwargs)
        stage = _rng.choice(list(TF_STAGES))
        # CheckpointManager.save writes the files (Checkpoint._write), then its callback records the state
        # (_record_state: an atomic write), deletes the old checkpoints (_sweep) and records the state again.
        if stage != "sweep":
            def record_state():
                _tf_leave(self._latest_checkpoint, stage)
                _die("tf CheckpointManager.save", path, stage=stage)
            self._record_state = record_state
        else:
            def sweep():
                old = [p for p in self._maybe_delete if p != self._latest_checkpoint][:1]
                for prefix in old:
                    os.remove(prefix + ".index")
                    if _rng.random() < 0.5:
                        for p in glob.glob(prefix + ".data-*"):
                            os.remove(p)
                _die("tf CheckpointManager.save", path, stage=stage, deleted=old)
            self._sweep = sweep
        with _Inside():
            return real_save(self, *args, **kwargs)

    module.CheckpointManager.save = save


# --------------------------------------------------------------------------- installing the wrappers

PATCHES = {"keras.src.saving.saving_lib": _patch_keras, "torch": _patch_torch,
           "tensorflow.python.checkpoint.checkpoint": _patch_tf_checkpoint,
           "tensorflow.python.checkpoint.checkpoint_management": _patch_tf_manager}


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, patch):
        self.loader, self.patch = loader, patch

    def __getattr__(self, name):   # get_source, is_package...: the real loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Patch a writer's module right after it is imported (before anything can copy its functions)."""

    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, PATCHES[name])
                return spec
        return None


def _chain():
    """Run the sitecustomize this one hides, if the environment has one."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if CTL and FOLDER:
    builtins.open = io.open = _open
    sys.meta_path.insert(0, _Finder())
_chain()
