"""TF 1.x programs converted in memory as they are imported, by TensorFlow's own upgrader
(``tensorflow.tools.compatibility``, the tables of ``tf_upgrade_v2``); the files on disk are never
changed and no bytecode of a converted file is written.

After the upgrader, a second pass rewrites each ``tf.<name>`` that TensorFlow no longer has at the top
but ``tf.compat.v1`` still has (``tf.flags``, ``tf.layers``, ``tf.contrib`` for the pieces
``trainer.estimator.contrib`` provides) to ``tf.compat.v1.<name>``, and each name neither has to a call
that fails, when it runs, in one line naming the file, the line and the upgrader's own message.

:func:`convert` says whether the source used TF 1.x (the upgrader renamed or flagged something, or
the second pass rewrote a name), which the launcher reads to choose TF 1.x behaviour.
"""

import ast
import contextlib
import io
import importlib.abc
import importlib.machinery
import os
import re
import sys
from typing import Dict, List, NamedTuple, Optional, Sequence

MISSING = "__trainer_missing_tf_name__"


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


class _Rewriter(ast.NodeTransformer):
    """``tf.X`` -> ``tf.compat.v1.X`` where only the compat module has it; a call that fails in one line
    where neither has it."""

    def __init__(self, aliases: Dict[str, str], filename: str, messages: Dict[int, str]):
        import tensorflow as tf

        self.aliases, self.filename, self.messages = aliases, filename, messages
        self.tf, self.v1 = tf, tf.compat.v1
        self.rewrote = 0

    def visit_Attribute(self, node):
        chain = _chain(node)
        if not chain or chain[0] not in self.aliases or not isinstance(node.ctx, ast.Load):
            return self.generic_visit(node)
        module = self.aliases[chain[0]]
        rest = chain[1:]
        if module == "tensorflow.compat.v1":
            if _resolve(self.v1, rest):
                return node
            return self._missing(node, "tf.compat.v1." + ".".join(rest))
        if module != "tensorflow" or _resolve(self.tf, rest):
            return node
        if _resolve(self.v1, rest):
            self.rewrote += 1
            new = ast.Attribute(ast.Attribute(ast.Name(chain[0], ast.Load()), "compat", ast.Load()), "v1", ast.Load())
            for part in rest:
                new = ast.Attribute(new, part, ast.Load())
            return ast.copy_location(new, node)
        return self._missing(node, "tf." + ".".join(rest))

    def _missing(self, node, name):
        self.rewrote += 1
        where = f"{os.path.basename(self.filename)}:{node.lineno}"
        message = self.messages.get(node.lineno, f"{name} is in neither TensorFlow 2 nor tf.compat.v1")
        call = ast.Call(ast.Name(MISSING, ast.Load()), [ast.Constant(name), ast.Constant(where), ast.Constant(message)],
                        [])
        return ast.copy_location(call, node)


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


def convert(source: str, filename: str) -> Converted:
    """``source`` upgraded and compiled (the original's line numbers kept)."""
    with contextlib.redirect_stdout(io.StringIO()):  # the upgrader prints each change
        ok, text, logs, errors = _upgrader().update_string_pasta(source, filename)
    if not ok:  # the upgrader could not parse it: compile the original, whose error then shows
        return Converted(compile(source, filename, "exec"), False, [])
    tree = ast.parse(text, filename)
    messages = _messages(errors)
    rewriter = _Rewriter(_aliases(tree), filename, messages)
    tree = ast.fix_missing_locations(rewriter.visit(tree))
    renamed = any("Renamed" in line or "ERROR" in line for line in logs + errors) or text != source
    findings = [f"{os.path.basename(filename)}:{line}: {message}" for line, message in sorted(messages.items())]
    return Converted(compile(tree, filename, "exec"), renamed or rewriter.rewrote > 0, findings)


def missing_name(name: str, where: str, message: str):
    raise SystemExit(f"error: {where}: {name} is not available in this TensorFlow nor in tf.compat.v1 "
                     f"(TensorFlow's upgrader: {message}); port that line of the program")


class _ConvertingLoader(importlib.machinery.SourceFileLoader):
    """A module of the program's own, converted as it is imported (no bytecode read or written)."""

    def get_code(self, fullname):
        source = importlib.util.decode_source(self.get_data(self.path))
        return convert(source, self.path).code

    def exec_module(self, module):
        module.__dict__[MISSING] = missing_name
        super().exec_module(module)


class ProgramFinder(importlib.abc.MetaPathFinder):
    """Finds the program's own modules (files under ``roots``) and converts them as they are imported."""

    def __init__(self, roots: Sequence[str]):
        self.roots = [os.path.join(os.path.realpath(r), "") for r in roots]

    def find_spec(self, fullname, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        origin = os.path.realpath(spec.origin)
        if not any(origin.startswith(root) for root in self.roots) or "site-packages" in origin:
            return None
        spec.loader = _ConvertingLoader(fullname, spec.origin)
        return spec


def uses_tf1(paths: Sequence[str]) -> bool:
    """Whether any of these source files uses TF 1.x names (what the upgrader or the second pass changes)."""
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                source = handle.read()
        except (OSError, UnicodeDecodeError):
            continue
        if "tensorflow" in source and convert(source, path).tf1:
            return True
    return False


def install(roots: Sequence[str]) -> ProgramFinder:
    finder = ProgramFinder(roots)
    sys.meta_path.insert(0, finder)
    return finder
