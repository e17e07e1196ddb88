"""Every command in README.md, docs/*.md and examples/README.md runs as written, on this machine, offline.

The commands are read from the documents' ```bash blocks (``train``, ``train-report`` and
``train-estimator`` lines, with their continuation lines) and run in document order, in one working
dir that holds the files the documents name (``my_pkg/``, ``my_program.py``, ``my_arrays.npz``,
``train.csv``, ``data/*.tfrecord``: ``docs_fixtures.py`` writes them), with a short step cap: each
``train.max_steps=N`` becomes a small number, commands without one get a smaller one appended, a
warm-up shrinks with it, evaluations read a few batches (``eval.steps``) and sweeps try fewer trials. ``<same>`` stands for the previous command's arguments, as the text says.

A command that needs what this machine lacks says so in its comment, and is checked as follows:
``(needs a GPU)`` and ``(needs TF_CONFIG)`` must fail in one line naming what is missing;
``(needs the internet)`` must run, or fail in one line where there is no internet;
``(needs other hosts)`` and ``(needs SLURM)`` are not run (their hosts do not exist here).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from docs_fixtures import write_fixtures
from helpers import TESTS_DIR

pytestmark = [pytest.mark.cli, pytest.mark.slow]

ROOT = os.path.dirname(TESTS_DIR)
DOCUMENTS = ["README.md"] + sorted(os.path.join("docs", n) for n in os.listdir(os.path.join(ROOT, "docs"))
                                   if n.endswith(".md")) + ["examples/README.md"]
COMMANDS = ("train", "train-report", "train-estimator")
STEPS, MORE_STEPS, TRIALS, EVAL_STEPS = 4, 8, 2, 2
NOT_RUN = ("(needs other hosts)", "(needs SLURM)")
REFUSED = {"(needs a GPU)": "GPU", "(needs TF_CONFIG)": "TF_CONFIG"}
OFFLINE = "(needs the internet)"


def documented(path: str):
    """``(line number, command, comment)`` for each command of ``path``'s bash blocks."""
    found, block, pending, start = [], False, "", 0
    with open(os.path.join(ROOT, path)) as f:
        lines = f.read().splitlines()
    for number, line in enumerate(lines, 1):
        if line.strip().startswith("```"):
            block = line.strip() == "```bash"
            continue
        if not block:
            continue
        if not pending:
            start = number
        pending += line.rstrip("\\").rstrip() + " " if line.rstrip().endswith("\\") else line
        if line.rstrip().endswith("\\"):
            continue
        text, pending = pending, ""
        code, _, comment = _split_comment(text)
        for part in code.split(" && "):  # `pip install -e . && train ...`: the train command
            if part.split(None, 1)[:1] and part.split()[0] in COMMANDS:
                found.append((start, part.strip(), comment.strip()))
    return found


def _split_comment(text: str):
    """The command and its trailing ``# comment`` (a ``#`` outside quotes)."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i], "#", text[i + 1:]
    return text, "", ""


def capped(argv, follows: bool = False):
    """``argv`` with the step cap: ``train.max_steps=N`` smaller, else appended (more steps for a
    command that ``follows`` an earlier one's run); fewer trials."""
    if argv[0] != "train" or any(a.startswith("--") for a in argv):  # --cfg, --version, --help: no run
        return argv
    out = [re.sub(r"^train\.max_steps=\d+$", f"train.max_steps={MORE_STEPS}", a) for a in argv]
    out = [re.sub(r"^hydra\.sweeper\.n_trials=\d+$", f"hydra.sweeper.n_trials={TRIALS}", a) for a in out]
    out = [re.sub(r"^optimizer\.warmup_steps=\d+$", f"optimizer.warmup_steps={STEPS // 2}", a) for a in out]
    if not any(a.startswith("train.max_steps=") for a in out):
        out.append(f"train.max_steps={MORE_STEPS if follows else STEPS}")
    if not any(a.startswith("eval.steps=") for a in out):
        out.append(f"eval.steps={EVAL_STEPS}")
    if any(a.startswith("+sweep=") for a in out) and not any(a.startswith("hydra.sweeper.n_trials=") for a in out):
        out.append(f"hydra.sweeper.n_trials={TRIALS}")
    return out


def _cases():
    cases, previous = [], None
    for path in DOCUMENTS:
        for number, code, comment in documented(path):
            follows = "<same>" in code or "resume=" in code or "outputs/" in code or code.startswith("train-report")
            if "<same>" in code:
                code = code.replace("<same>", previous.split(None, 1)[1])
            else:
                previous = code
            cases.append(pytest.param(path, number, code, comment, follows, id=f"{path}:{number}"))
    return cases


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    here = tmp_path_factory.mktemp("docs")
    write_fixtures(str(here))
    return here


def test_the_documents_have_commands():
    assert len(_cases()) > 40  # the extraction found them: a broken fence would silently test nothing


@pytest.mark.parametrize("path,number,code,comment,follows", _cases())
def test_documented_command(workdir, path, number, code, comment, follows):
    """One command as written (capped). A command that follows an earlier one's run (``<same>``,
    ``resume=``, a path under ``outputs/``, ``train-report``) finds the runs of the commands before it;
    any other starts from no runs, as a reader trying that command alone would, so it must train
    (a leftover run of the same name would turn it into "nothing to do")."""
    if any(mark in comment for mark in NOT_RUN):
        pytest.skip(f"{path}:{number} needs hosts this machine does not have ({comment})")
    if not follows:
        shutil.rmtree(workdir / "outputs", ignore_errors=True)
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    env.pop("TF_CONFIG", None)
    argv = capped(shlex.split(code), follows)
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    refusal = [what for mark, what in REFUSED.items() if mark in comment]
    if refusal:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert done.returncode != 0 and len(errors) == 1 and refusal[0] in errors[0], \
            f"{path}:{number}: {' '.join(argv)}\n{done.stderr[-2000:]}"
        return
    if OFFLINE in comment and done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, f"{path}:{number}: {' '.join(argv)}\n{done.stderr[-2000:]}"
        return
    assert done.returncode == 0, f"{path}:{number}: {' '.join(argv)} exited {done.returncode}\n{done.stderr[-3000:]}"
    assert "nothing to do" not in done.stdout + done.stderr, f"{path}:{number}: {' '.join(argv)} trained nothing"
