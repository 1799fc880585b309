"""Check that a built wheel and sdist hold every file attnviz reads at run time.

    python packaging/wheel_contents.py SOURCE_TREE DIST_FOLDER

SOURCE_TREE is the tree the distributions were built from; DIST_FOLDER holds one ``attnviz-*.whl`` and one
``attnviz-*.tar.gz``. Every file under ``attnviz/`` (modules and any data beside them) must be in the wheel
at the same place and every file under ``resources/`` at ``attnviz/resources/``; the sdist must hold both
folders as they are. The wheel must hold nothing else but its ``.dist-info``. Exit 1 with the list of
what is missing or extra, else print a summary line. Uses the standard library only.
"""

from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path


def tree_files(root: Path, folder: str) -> list[str]:
    """Files under root/folder, relative to root with '/' separators, caches left out."""
    base = root / folder
    return sorted(p.relative_to(root).as_posix() for p in base.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".nbi", ".nbc"))


def expected_in_wheel(root: Path) -> set[str]:
    """Where each run-time file of the source tree lands in the wheel."""
    modules = set(tree_files(root, "attnviz"))
    resources = {"attnviz/" + f for f in tree_files(root, "resources")}  # resources/x -> attnviz/resources/x
    return modules | resources


def check(root: Path, dist: Path) -> list[str]:
    """The problems found (empty when the distributions are complete)."""
    wheels, sdists = sorted(dist.glob("attnviz-*.whl")), sorted(dist.glob("attnviz-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        return [f"expected one wheel and one sdist in {dist}, found {len(wheels)} and {len(sdists)}"]
    with zipfile.ZipFile(wheels[0]) as z:
        in_wheel = {n for n in z.namelist() if not n.endswith("/")}
    with tarfile.open(sdists[0]) as t:
        top = sdists[0].name[: -len(".tar.gz")] + "/"
        in_sdist = {m.name[len(top):] for m in t.getmembers() if m.isfile() and m.name.startswith(top)}
    want = expected_in_wheel(root)
    problems = [f"missing from the wheel: {f}" for f in sorted(want - in_wheel)]
    extra = sorted(f for f in in_wheel - want if ".dist-info/" not in f)
    problems += [f"in the wheel but not a file of attnviz/ or resources/: {f}" for f in extra]
    source = set(tree_files(root, "attnviz")) | set(tree_files(root, "resources"))
    problems += [f"missing from the sdist: {f}" for f in sorted(source - in_sdist)]
    if not problems:
        data = sorted(f for f in want if not f.endswith(".py"))
        print(f"wheel {wheels[0].name}: {len(in_wheel)} files, every one of the {len(want)} expected "
              f"({len(data)} data files: {', '.join(data)}); sdist {sdists[0].name}: {len(in_sdist)} files")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: wheel_contents.py SOURCE_TREE DIST_FOLDER", file=sys.stderr)
        return 2
    problems = check(Path(argv[0]), Path(argv[1]))
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
