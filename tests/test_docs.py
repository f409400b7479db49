"""Every code block of the docs and the README that claims an output is run, and its output checked.

The convention (also in docs/testing.md): **a block claims an output when it shows a prompt.**

- A ```` ```pycon ```` block is a Python session, doctest's format: lines starting ``>>> ``
  (continued by ``... ``) are code, the lines under them up to the next prompt or blank line
  are what that code prints or returns.  The pycon blocks of one page are one session, run in
  order in one interpreter on every rank of ``mpiexec -n 4`` (they build meshes), in a fresh
  temporary working directory (so a session may write ``runs/a/step-00005``), and every rank
  must print what the block shows: SPMD code gives the same answer everywhere.  A
  statement that prints on one rank only (``mt.visualize_sharding(x)`` prints on the mesh's
  first rank) cannot be shown bare: print what it returns.
- A ```` ```console ```` block is a shell session: a line starting ``$ `` is a command
  (``python ...`` or ``mpiexec -n N python ...``, run from the repository root), the lines
  under it are its standard output.  A command may name a file that a block of the same page
  defines with ``title="NAME"`` in its fence (```` ```python title="quickstart.py" ````).
- In both, ``...`` in an output matches anything (doctest's ELLIPSIS), so a long output can be
  shown abridged; runs of whitespace compare equal (NORMALIZE_WHITESPACE); an exception is
  shown as doctest shows it (``Traceback (most recent call last):``, ``...``, then the
  exception line).

Blocks without a prompt (``python``, ``bash``, ``text``) claim nothing and are not run.

Run by hand: ``python -m pytest tests/test_docs.py -q``; one page's sessions alone:
``mpiexec -n 4 python tests/test_docs.py docs/guide/ops.md`` (rank 0 prints the report).
"""
import doctest
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from launcher import run_under_mpi

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
PAGES = [p for p in PAGES if not p.is_symlink()]   # generated results, linked into the site
RANKS = 4
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`]*)$")


def blocks(path):
    """The fenced blocks of a markdown file: (language, attributes, first line number, text)."""
    lines = Path(path).read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].strip()
        words = info.split(None, 1)
        lang = words[0].lstrip("{.") if words else ""
        attrs = dict(re.findall(r'(\w+)="([^"]*)"', info))
        body, i = [], i + 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        yield lang, attrs, i - len(body), "\n".join(body) + "\n"   # 0-based first line
        i += 1


def rel(path):
    return str(Path(path).resolve().relative_to(ROOT))


def sessions(path):
    """The page's pycon blocks as doctests (line numbers are the page's)."""
    parser = doctest.DocTestParser()
    return [parser.get_doctest(text, {}, f"{rel(path)}:{line}", rel(path), line)
            for lang, _, line, text in blocks(path) if lang == "pycon"]


def commands(path):
    """The page's console commands: (line, command, expected stdout), and its titled files."""
    files = {a["title"]: text for lang, a, _, text in blocks(path) if "title" in a}
    found = []
    for lang, _, line, text in blocks(path):
        if lang != "console":
            continue
        cmd = None
        for k, ln in enumerate(text.splitlines()):
            if ln.startswith("$ "):
                if cmd:
                    found.append(cmd)
                cmd = [line + k + 1, ln[2:].strip(), ""]
            elif cmd:
                cmd[2] += ln + "\n"
        if cmd:
            found.append(cmd)
    return [c for c in found if c[2].strip()], files


# ---- under mpiexec: run one page's sessions on every rank ---------------------------------

def run_sessions(path):
    """Run ``path``'s pycon blocks as one session on this rank; rank 0 prints every rank's
    failures and the exit status says whether any rank failed."""
    from mpi4py import MPI
    path, world = Path(path).resolve(), MPI.COMM_WORLD
    workdir = world.bcast(tempfile.mkdtemp(prefix="mtensor-docs-") if world.rank == 0 else None)
    os.chdir(workdir)                          # files a session writes land in a fresh folder
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report, globs = io.StringIO(), {"__name__": "__docs__"}
    for test in sessions(path):
        test.globs = globs                     # one session per page: state carries on
        runner.run(test, out=report.write, clear_globs=False)
    failed, tried = runner.failures, runner.tries
    results = world.gather((failed, tried, report.getvalue()), root=0)
    if world.rank == 0:
        for rank, (f, t, text) in enumerate(results):
            if f:
                print(f"---- rank {rank}: {f} of {t} examples failed\n{text}")
        print(f"docs sessions {rel(path)}: {sum(r[1] for r in results)} examples tried, "
              f"{sum(r[0] for r in results)} failed over {world.size} ranks")
    ok = world.bcast(all(r[0] == 0 for r in results) if world.rank == 0 else None, root=0)
    if world.rank == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    sys.stdout.flush()
    return 0 if ok else 1


# ---- under pytest -------------------------------------------------------------------------

SESSION_PAGES = [p for p in PAGES if sessions(p)]
COMMANDS = [(p, *c) for p in PAGES for c in commands(p)[0]]


def test_the_convention_finds_blocks():
    """The guide shows sessions and the README a command with its output (a renamed fence
    would otherwise make this file test nothing)."""
    assert any("guide" in str(p) for p in SESSION_PAGES), SESSION_PAGES
    assert any(p.name == "README.md" for p, *_ in COMMANDS), COMMANDS


@pytest.mark.parametrize("page", SESSION_PAGES, ids=rel)
def test_sessions(page):
    result = run_under_mpi(RANKS, [__file__, str(page)], timeout=400, merge_stderr=False)
    assert result.returncode == 0, result.stdout[-20000:] + (result.stderr or "")[-5000:]
    assert " 0 failed" in result.stdout, result.stdout


@pytest.mark.parametrize("page,line,command,expected", COMMANDS,
                         ids=[f"{rel(p)}:{ln}" for p, ln, *_ in COMMANDS])
def test_commands(page, line, command, expected, tmp_path):
    words = shlex.split(command)
    for name, text in commands(page)[1].items():   # files the page defines by title=
        (tmp_path / name).write_text(text)
        words = [str(tmp_path / name) if w == name else w for w in words]
    if words[0] == "mpiexec" and words[1] == "-n" and words[3] == "python":
        result = run_under_mpi(int(words[2]), words[4:], timeout=400, merge_stderr=False)
    elif words[0] == "python":
        result = subprocess.run([sys.executable, *words[1:]], cwd=ROOT, capture_output=True,
                                text=True, timeout=400)
    else:
        pytest.fail(f"{rel(page)}:{line}: cannot run {command!r} (python or mpiexec -n N python)")
    assert result.returncode == 0, result.stdout + (result.stderr or "")[-5000:]
    checker = doctest.OutputChecker()
    assert checker.check_output(expected, result.stdout, FLAGS), (
        f"{rel(page)}:{line}: {command}\n"
        + checker.output_difference(doctest.Example(command, expected), result.stdout, FLAGS))


if __name__ == "__main__":
    sys.exit(run_sessions(sys.argv[1]))
