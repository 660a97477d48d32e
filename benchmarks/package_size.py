"""Deployment package size of the Lambda functions (what ``sam build`` packages).

    python -m benchmarks.package_size [--python 3.12] [--platform manylinux2014_aarch64]

Installs ``deploy/lambda/requirements.txt`` for the functions' runtime and architecture
(wheels only, as ``sam build`` does without a container) into a temporary folder with the
code ``deploy/lambda`` links to, zips it, and prints the zipped and unzipped sizes with the
largest top-level entries. Needs the package index (pip); writes nothing in the project.
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "deploy" / "lambda"
MB = 1024 * 1024


def build(target: Path, python: str, platform: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(target),
            "--platform",
            platform,
            "--implementation",
            "cp",
            "--python-version",
            python,
            "--only-binary=:all:",
            "-r",
            str(PACKAGE / "requirements.txt"),
        ],
        check=True,
    )
    # As sam build: dependencies keep the .pyc pip compiles (Lambda's /var/task is
    # read-only, so they save compiling at every cold start); the project's own code is
    # copied without them.
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for entry in PACKAGE.iterdir():
        if entry.is_dir():  # the links to durable/, handlers/, examples/
            shutil.copytree(entry.resolve(), target / entry.name, ignore=ignore)


def sizes(folder: Path) -> tuple[int, int, dict[str, int]]:
    by_entry: dict[str, int] = {}
    unzipped = 0
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                size = path.stat().st_size
                unzipped += size
                top = path.relative_to(folder).parts[0]
                by_entry[top] = by_entry.get(top, 0) + size
                archive.write(path, path.relative_to(folder).as_posix())
    return len(buffer.getvalue()), unzipped, by_entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="3.12", help="the functions' runtime version")
    parser.add_argument("--platform", default="manylinux2014_aarch64", help="arm64 functions")
    parser.add_argument(
        "--function-dir",
        type=Path,
        help="measure a function folder sam build made (e.g. .aws-sam/build/WorkerFunction "
        "after durable sam build, bytecode included) instead of installing here",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = args.function_dir or Path(tmp) / "package"
        if args.function_dir is None:
            build(target, args.python, args.platform)
        zipped, unzipped, by_entry = sizes(target)
    what = args.function_dir or f"python {args.python}, {args.platform}"
    print(f"deployment package ({what}), one per function:")
    print(f"  zipped   {zipped / MB:6.1f} MB   (Lambda limit 50 MB for direct upload)")
    print(f"  unzipped {unzipped / MB:6.1f} MB   (Lambda limit 250 MB)")
    code = sum(by_entry.get(name, 0) for name in ("durable", "handlers", "examples"))
    print(f"  of which this project's code: {code / 1024:.0f} KB")
    print("  largest entries:")
    for name, size in sorted(by_entry.items(), key=lambda kv: -kv[1])[:8]:
        print(f"    {name:<28} {size / MB:6.1f} MB")


if __name__ == "__main__":
    main()
