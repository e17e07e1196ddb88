"""TF 1.x programs converted in memory as they are imported, by TensorFlow's own upgrader
(``tensorflow.tools.compatibility``, the tables of ``tf_upgrade_v2``); the files on disk are never
changed and no bytecode of a converted file is written.

After the upgrader, a second pass rewrites each ``tf.<name>`` that TensorFlow no longer has at the top
but ``tf.compat.v1`` still has (``tf.flags``, ``tf.layers``, ``tf.contrib`` for the pieces
``trainer.estimator.contrib`` provides) to ``tf.compat.v1.<name>``, and each name neither has to a call
that fails, when it runs, in one line naming the file, the line and the upgrader's own message.

:func:`uses_tf1` says whether a program's sources name what only TF 1.x had (a ``tf.X`` TensorFlow 2
lacks, or ``tf.contrib``), which the launcher reads to choose TF 1.x behaviour; only then does the
upgrader run (it reads every source as TF 1.x). A TF 2 program gets the second pass alone.
"""

import ast
import contextlib
import io
import importlib.abc
import logging
import importlib.machinery
import linecache
import os
import re
import sys
from typing import Dict, List, NamedTuple, Optional, Sequence

MISSING = "__trainer_missing_tf_name__"
log = logging.getLogger("trainer")
# The runner's own package: never a program's module, also where a program sits in a checkout of it.
_RUNNER_PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "")


class Converted(NamedTuple):
    code: object  # the compiled module
    tf1: bool  # the source used TF 1.x names
    findings: List[str]  # "file:line: message" of each name the program will fail on if it runs it


def _upgrader():
    from tensorflow.tools.compatibility import ast_edits, tf_upgrade_v2

    return ast_edits.ASTCodeUpgrader(tf_upgrade_v2.TFAPIChangeSpec())


_LOG = re.compile(r"^(?:.*?:)?(\d+):(\d+): (ERROR|WARNING|INFO): (.*)$", re.S)


def _messages(lines: Sequence[str]) -> Dict[int, str]:
    """The upgrader's ERROR and WARNING messages by line."""
    found: Dict[int, str] = {}
    for line in lines:
        match = _LOG.match(line)
        if match and match.group(3) in ("ERROR", "WARNING"):
            found.setdefault(int(match.group(1)), match.group(4).strip().splitlines()[0])
    return found


def _resolve(root, parts: Sequence[str]) -> bool:
    obj = root
    for part in parts:
        try:
            obj = getattr(obj, part)
        except (AttributeError, SystemExit, ImportError):
            return False
    return True


def _chain(node) -> Optional[List[str]]:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(names)]
    return None


class _Rewriter(ast.NodeVisitor):
    """Finds each ``tf.X`` that only the compat module has (-> ``tf.compat.v1.X``) and each that neither
    has (-> a call that fails in one line); :attr:`edits` are the replacements, by source position."""

    def __init__(self, aliases: Dict[str, str], filename: str, messages: Dict[int, str]):
        import tensorflow as tf

        self.aliases, self.filename, self.messages = aliases, filename, messages
        self.tf, self.v1 = tf, tf.compat.v1
        self.edits: List[tuple] = []  # (line, start col, end line, end col, replacement); cols in UTF-8 bytes

    def visit_Attribute(self, node):
        chain = _chain(node)
        if not chain or chain[0] not in self.aliases or not isinstance(node.ctx, ast.Load):
            return self.generic_visit(node)
        module = self.aliases[chain[0]]
        rest = chain[1:]
        if module == "tensorflow.compat.v1":
            if not _resolve(self.v1, rest):
                self._missing(node, "tf.compat.v1." + ".".join(rest))
        elif module == "tensorflow" and not _resolve(self.tf, rest):
            if _resolve(self.v1, rest):
                self._edit(node, ".".join([chain[0], "compat", "v1", *rest]))
            else:
                self._missing(node, "tf." + ".".join(rest))

    def _edit(self, node, replacement: str):
        self.edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, replacement))

    def _missing(self, node, name):
        where = f"{os.path.basename(self.filename)}:{node.lineno}"
        message = self.messages.get(node.lineno, f"{name} is in neither TensorFlow 2 nor tf.compat.v1")
        self._edit(node, f"{MISSING}({name!r}, {where!r}, {message!r})")


def _apply(text: str, edits: Sequence[tuple]) -> str:
    """``text`` with each edit's span replaced (last first, so earlier positions hold); a span that runs
    over several lines becomes one line, the rest of its lines are kept blank so line numbers hold."""
    lines = text.splitlines(True)
    for line, col, end_line, end_col, replacement in sorted(edits, reverse=True):
        head = lines[line - 1].encode("utf-8")[:col].decode("utf-8")
        tail = lines[end_line - 1].encode("utf-8")[end_col:].decode("utf-8")
        lines[line - 1] = head + replacement + tail.rstrip("\n") + "\n" * (end_line - line + 1)
        for index in range(line, end_line):
            lines[index] = ""
    return "".join(lines)


def _aliases(tree) -> Dict[str, str]:
    """Names bound to TensorFlow's modules by the module's imports (``import tensorflow as tf``)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ("tensorflow", "tensorflow.compat.v1"):
                    aliases[alias.asname or "tensorflow"] = alias.name if alias.asname else "tensorflow"
        elif isinstance(node, ast.ImportFrom) and node.module == "tensorflow.compat" and node.level == 0:
            for alias in node.names:
                if alias.name == "v1":
                    aliases[alias.asname or "v1"] = "tensorflow.compat.v1"
    return aliases


_converted: Dict[tuple, Converted] = {}  # (filename, source, upgrade) -> result: detection and import convert once


def convert(source: str, filename: str, upgrade: bool = True) -> Converted:
    """:func:`_convert`, once per file, text and kind."""
    key = (filename, source, upgrade)
    if key not in _converted:
        _converted[key] = _convert(source, filename, upgrade)
    return _converted[key]


def _convert(source: str, filename: str, upgrade: bool) -> Converted:
    """``source`` compiled (the original's line numbers kept): upgraded by TensorFlow's upgrader where
    ``upgrade`` (a TF 1.x program: the upgrader reads every source as TF 1.x, and would turn a TF 2
    program's ``tf.saved_model.load(path)`` into TF 1.x's loader), then its names that only
    ``tf.compat.v1`` has rewritten. A converted module's code is named ``"<filename> (converted)"`` and
    ``linecache`` holds its text under that name, so AutoGraph (which reads a function's source to
    convert it for ``Dataset.map``) and tracebacks see the code that runs, not the file on disk
    (AutoGraph re-reads the file of a module's ``__file__``)."""
    if "tensorflow" not in source:  # no TensorFlow name to upgrade: compiled as it is
        return Converted(compile(source, filename, "exec"), False, [])
    tf1 = _tf1_evidence(source, filename)
    text, messages = source, {}
    if upgrade:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the upgrader prints each change
                ok, text, _, errors = _upgrader().update_string_pasta(source, filename)
        # broad: the upgrader's parser (pasta) fails inside on syntax newer than it knows (NameError on ':=')
        except Exception as e:
            log.warning("%s: TensorFlow's upgrader could not read it (%s: %s); only its tf.compat.v1 names are "
                        "rewritten", os.path.basename(filename), type(e).__name__, e)
            ok, text, errors = True, source, []
        if not ok:  # the upgrader could not parse it: compile the original, whose error then shows
            return Converted(compile(source, filename, "exec"), False, [])
        messages = _messages(errors)
    rewriter = _Rewriter(_aliases(ast.parse(text, filename)), filename, messages)
    rewriter.visit(ast.parse(text, filename))
    text = _apply(text, rewriter.edits)
    findings = [f"{os.path.basename(filename)}:{line}: {message}" for line, message in sorted(messages.items())]
    code_name = filename
    if text != source:  # a name of its own: AutoGraph refreshes linecache from disk for a module's __file__
        code_name = f"{filename} (converted)"
        linecache.cache[code_name] = (len(text), None, text.splitlines(True), code_name)
    return Converted(compile(text, code_name, "exec"), tf1, findings)


def _tf1_evidence(source: str, filename: str) -> bool:
    """Whether ``source`` names what only TF 1.x had: a ``tf.X`` TensorFlow 2 lacks (``tf.logging``,
    ``tf.Session``, ``tf.train.AdamOptimizer``, ...) or ``tf.contrib``. A TF 2 program never does (it
    would fail on any TF 2), while the upgrader's renames include names TF 2 has too."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        return False
    aliases = _aliases(tree)
    rewriter = _Rewriter(aliases, filename, {})
    rewriter.visit(tree)
    if rewriter.edits:
        return True
    return any((chain := _chain(node)) and len(chain) > 1 and aliases.get(chain[0]) == "tensorflow"
               and chain[1] == "contrib" for node in ast.walk(tree) if isinstance(node, ast.Attribute))


def missing_name(name: str, where: str, message: str):
    raise SystemExit(f"error: {where}: {name} is not available in this TensorFlow nor in tf.compat.v1 "
                     f"(TensorFlow's upgrader: {message}); port that line of the program")


class _ConvertingLoader(importlib.machinery.SourceFileLoader):
    """A module of the program's own, converted as it is imported (no bytecode read or written);
    ``upgrade``: a TF 1.x program's, through TensorFlow's upgrader first."""

    def __init__(self, fullname, path, upgrade: bool = True):
        super().__init__(fullname, path)
        self.upgrade = upgrade

    def get_code(self, fullname):
        source = importlib.util.decode_source(self.get_data(self.path))
        return convert(source, self.path, self.upgrade).code

    def exec_module(self, module):
        module.__dict__[MISSING] = missing_name
        super().exec_module(module)


class ProgramFinder(importlib.abc.MetaPathFinder):
    """Finds the program's own modules (files under ``roots``) and converts them as they are imported."""

    def __init__(self, roots: Sequence[str], upgrade: bool = True):
        self.roots = [os.path.join(os.path.realpath(r), "") for r in roots]
        self.upgrade = upgrade

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        origin = os.path.realpath(spec.origin)
        if not any(origin.startswith(root) for root in self.roots) or "site-packages" in origin or runners_own(origin):
            return None
        spec.loader = _ConvertingLoader(fullname, spec.origin, self.upgrade)
        return spec


def runners_own(path: str) -> bool:
    """Whether ``path`` is a module of the runner's own package (never a program's, also when the
    program sits in a checkout of the runner)."""
    return os.path.realpath(path).startswith(_RUNNER_PACKAGE)


def uses_tf1(paths: Sequence[str]) -> bool:
    """Whether any of these source files uses TF 1.x names (what the upgrader or the second pass changes)."""
    for path in paths:
        if runners_own(path):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                source = handle.read()
        except (OSError, UnicodeDecodeError):
            continue
        if "tensorflow" in source and _tf1_evidence(source, path):
            return True
    return False


def install(roots: Sequence[str], upgrade: bool = True) -> ProgramFinder:
    finder = ProgramFinder(roots, upgrade)
    sys.meta_path.insert(0, finder)
    return finder
