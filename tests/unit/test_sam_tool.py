"""``durable sam``: the runtime's Python is found where installers put it, or named."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable import cli
from durable.local import sam


def _fake_python(folder: Path, works: bool = True) -> Path:
    """An executable that answers like python3.12, or fails like an unselected pyenv shim."""
    folder.mkdir(parents=True)
    exe = folder / "python3.12"
    exe.write_text("#!/bin/sh\necho 3.12\n" if works else "#!/bin/sh\nexit 127\n")
    exe.chmod(0o755)
    return exe


def test_python_on_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path = _fake_python(tmp_path / "bin")
    _fake_python(tmp_path / "pyenv/versions/3.12.9/bin")
    monkeypatch.setenv("PATH", str(on_path.parent))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    assert sam.find_runtime_python() == on_path


def test_the_newest_pyenv_or_uv_patch_release_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    assert sam.find_runtime_python() is None
    uv = _fake_python(tmp_path / "uv/cpython-3.12.4-linux-x86_64-gnu/bin")
    assert sam.find_runtime_python() == uv
    _fake_python(tmp_path / "pyenv/versions/3.12.9/bin")
    newest = _fake_python(tmp_path / "pyenv/versions/3.12.10/bin")
    _fake_python(tmp_path / "pyenv/versions/3.13.0/bin")  # not the runtime
    assert sam.find_runtime_python() == newest


def test_a_shim_that_does_not_run_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim = _fake_python(tmp_path / "shims", works=False)
    monkeypatch.setenv("PATH", str(shim.parent))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    assert sam.find_runtime_python() is None
    real = _fake_python(tmp_path / "pyenv/versions/3.12.1/bin")
    assert sam.find_runtime_python() == real


def test_the_runtimes_python_goes_first_on_sams_path(tmp_path: Path) -> None:
    exe = _fake_python(tmp_path / "py/bin")
    env = sam.runtime_env(exe)
    assert env["PATH"].split(":")[0] == str(exe.parent)
    assert "SAM_CLI_TELEMETRY" in env


def test_build_without_the_runtime_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    ran: list[object] = []
    monkeypatch.setattr(sam, "ensure_sam", lambda: tmp_path / "sam")
    monkeypatch.setattr("durable.local.sam.subprocess.run", lambda *a, **k: ran.append(a))
    assert cli.main(["sam", "build"]) == 1
    err = capsys.readouterr().err
    assert "needs python3.12" in err and "pyenv install 3.12" in err
    assert ran == []  # sam never ran


def test_cfn_lint_runs_the_linter_sam_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    class Done:
        returncode = 0

    def fake_run(cmd: list[str], **_: object) -> Done:
        calls.append(cmd)
        return Done()

    monkeypatch.setattr(sam, "ensure_sam", lambda: tmp_path / "venv/bin/sam")
    monkeypatch.setattr("durable.local.sam.subprocess.run", fake_run)
    assert sam.run(["cfn-lint", "template.yaml"]) == 0
    assert sam.run(["validate", "--lint"]) == 0
    assert calls == [
        [str(tmp_path / "venv/bin/cfn-lint"), "template.yaml"],
        [str(tmp_path / "venv/bin/sam"), "validate", "--lint"],
    ]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["build"], ".aws-sam/build"),
        (["build", "--build-dir", "out/b"], "out/b"),
        (["build", "-b", "x"], "x"),
        (["build", "--build-dir=y", "--cached"], "y"),
    ],
)
def test_the_build_folder_is_where_sam_puts_it(args: list[str], expected: str) -> None:
    assert sam.build_dir(args) == Path(expected)


def test_what_sam_built_is_compiled_to_bytecode_that_needs_no_source_check(
    tmp_path: Path,
) -> None:
    """GIVEN a built function's folder (sources only, as sam build leaves it) WHEN
    compile_build runs THEN each module has a .pyc of the interpreter given, hash-based and
    unchecked (flags 0b01): a zip's 2-second times cannot make it look stale on Lambda."""
    import importlib.util
    import sys

    module = tmp_path / "WorkerFunction" / "pkg" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text("X = 1\n")
    assert sam.compile_build(tmp_path, Path(sys.executable)) == 1
    pyc = Path(importlib.util.cache_from_source(str(module)))
    header = pyc.read_bytes()[:8]
    assert header[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(header[4:8], "little") == 0b01  # hash-based, not checked


def test_a_successful_build_is_compiled_with_the_runtimes_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = _fake_python(tmp_path / "py/bin")
    (tmp_path / "out").mkdir()
    compiled: list[tuple[Path, Path]] = []

    class Done:
        returncode = 0

    monkeypatch.setattr(sam, "ensure_sam", lambda: tmp_path / "venv/bin/sam")
    monkeypatch.setattr(sam, "find_runtime_python", lambda: runtime)
    monkeypatch.setattr("durable.local.sam.subprocess.run", lambda *a, **k: Done())

    def compile_build(folder: Path, python: Path) -> int:
        compiled.append((folder, python))
        return 0

    monkeypatch.setattr(sam, "compile_build", compile_build)
    assert sam.run(["build", "--build-dir", str(tmp_path / "out")]) == 0
    assert compiled == [(tmp_path / "out", runtime)]
    Done.returncode = 1  # a failed build is left as it is
    assert sam.run(["build", "--build-dir", str(tmp_path / "out")]) == 1
    assert len(compiled) == 1
