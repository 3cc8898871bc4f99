"""C extensions for the CPU backend (``csrc/*.c``), compiled at first use and cached.

NumPy does nearly everything the CPU backend needs at C speed; where it does not (it converts
float16 one element at a time; exact GELU takes 17 passes over the data), a small C file in
``csrc/`` does that one thing with NumPy's bits, and the NumPy code it replaces stays as the
fallback and the definition. :func:`load` compiles a file
into a CPython extension module the first time it is asked for, with the C compiler Python was
built with (``$CC``, else sysconfig's, else ``cc``) and ``-O3 -ffp-contract=off``, and keeps
the result in ``$XDG_CACHE_HOME/minitorch_amp/host`` (``~/.cache/...``), named by the SHA-256
of the source, the command and the Python build: a changed file or compiler is a new entry, so
an entry is never stale. A compile goes to a temporary file moved into place with
``os.replace``, so processes compiling at once (``pytest -n``) never load half a file.

No compiler, a failed compile or ``MINITORCH_AMP_HOST_C=0``: :func:`load` returns None, the
caller takes its NumPy path (same results, slower), and :func:`status` says why
(``python -m minitorch_amp`` prints it).

Example:
    >>> module = load("float16")  # the compiled csrc/float16.c, or None
    >>> status("float16").startswith(("compiled", "NumPy"))
    True
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

SWITCH_ENV = "MINITORCH_AMP_HOST_C"
COMPILE_TIMEOUT_S = 300

_loaded: dict = {}  # name -> (module or None, what status() says)


def csrc_dir() -> Path:
    """Where the ``.c`` files are: inside the installed package, else the source checkout."""
    packaged = Path(__file__).resolve().parents[1] / "csrc"
    if packaged.is_dir() and any(packaged.glob("*.c")):
        return packaged
    return Path(__file__).resolve().parents[2] / "csrc"


def cache_dir() -> Path:
    """The folder compiled modules are kept in."""
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    root = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"  # XDG: relative ignored
    return root / "minitorch_amp" / "host"


def load(name: str):
    """The extension module compiled from ``csrc/<name>.c``, or None (see :func:`status`)."""
    if name not in _loaded:
        _loaded[name] = _load(name)
    return _loaded[name][0]


def status(name: str) -> str:
    """``'compiled C (path)'``, or ``'NumPy (why the C file is not used)'``."""
    load(name)
    return _loaded[name][1]


def forget(name: str) -> None:
    """Drop what :func:`load` found, so that the next call looks again (the tests use it)."""
    _loaded.pop(name, None)


def compiler() -> list[str] | None:
    """The C compiler's command line (its first word found on ``PATH``), or None."""
    for setting in (os.environ.get("CC", ""), sysconfig.get_config_var("CC") or "", "cc"):
        words = shlex.split(setting)
        if words and shutil.which(words[0]):
            return words
    return None


def _load(name: str):
    if os.environ.get(SWITCH_ENV, "").strip() == "0":
        return None, f"NumPy ({SWITCH_ENV}=0)"
    source = csrc_dir() / f"{name}.c"
    cc = compiler()
    if cc is None:
        return None, "NumPy (no C compiler: set CC or install gcc or clang)"
    if not Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        return None, "NumPy (no Python.h: install Python's development headers)"
    # NOTE: -ffp-contract=off: no fused multiply-add, so each float operation rounds as
    # NumPy's does (GCC's default for C fuses a*b + c where the target has FMA)
    command = [*cc, "-O3", "-ffp-contract=off", "-shared", "-fPIC"]
    command.append(f"-I{sysconfig.get_paths()['include']}")
    if sys.platform == "darwin":  # (symbols resolved by the interpreter that loads it)
        command += ["-undefined", "dynamic_lookup"]
    try:
        text = source.read_bytes()
    except OSError as exc:
        return None, f"NumPy ({source} cannot be read: {exc})"
    key = hashlib.sha256(
        b"\0".join([text, " ".join(command).encode(), sys.version.encode(), sys.platform.encode()])
    ).hexdigest()[:20]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # (a read-only home: this process compiles into a folder of its own)
        folder = Path(tempfile.mkdtemp(prefix="minitorch_amp_host_"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    target = folder / f"{name}-{key}{suffix}"
    if target.is_file():
        module, _ = _import(name, target)
        if module is not None:
            return module, f"compiled C ({target})"
    problem = _compile(command, source, target)
    if problem:
        return None, f"NumPy (compiling {source.name} failed: {problem})"
    module, problem = _import(name, target)
    if module is None:
        return None, f"NumPy ({target} was compiled but does not import: {problem})"
    return module, f"compiled C ({target})"


def _compile(command: list[str], source: Path, target: Path) -> str | None:
    """Compile ``source`` into ``target`` (atomically); what went wrong, or None."""
    fd, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-", suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run(
            [*command, str(source), "-o", partial],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            return lines[-1] if lines else f"exit status {done.returncode}"
        os.replace(partial, target)
        return None
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _import(name: str, path: Path):
    """``(module, None)`` from ``path`` (its init function is ``PyInit__<name>``), or
    ``(None, why)``."""
    try:
        spec = importlib.util.spec_from_file_location(f"minitorch_amp.backend._{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module, None
    except (ImportError, OSError) as exc:
        return None, str(exc)
