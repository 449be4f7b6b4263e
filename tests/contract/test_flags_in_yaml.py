"""Project rule: server flags live in YAML, never in Python.

No Python file in sweep/, launchers/ or hydra_plugins/ (outside tests/) may
spell ``--speculative...`` or ``--tp-size`` in code: the renderer takes every
flag from conf/ (and the simulator declares its own in sweep/sim/*.yaml), so
supporting a fork that spells DDTree differently is a YAML edit.

Comments and docstrings may mention flags (documentation, not rendering); any
other string literal, f-string part or bytes literal counts. Needs no sglang.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RULE_DIRS = ("sweep", "launchers", "hydra_plugins")
FORBIDDEN = ("--speculative", "--tp-size")


def flag_literals(source: str, filename: str = "<src>") -> list[tuple[int, str]]:
    """String literals in code (f-string parts and bytes included) that spell a
    forbidden flag. Comments and docstrings are documentation, not rendering,
    and are not counted."""
    tree = ast.parse(source, filename)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                docstrings.add(id(body[0].value))
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) \
                and id(node) not in docstrings:
            text = node.value.decode("latin-1") if isinstance(node.value, bytes) else node.value
            hits += [(node.lineno, f) for f in FORBIDDEN if f in text]
    return hits


def test_flag_literal_scanner_can_fail():
    src = ('"""Docs may mention --speculative-algorithm."""\n'
           '# and comments --tp-size\n'
           'X = ["--tp-size", 8]\n'
           'def f(n):\n    """--speculative-x in a docstring"""\n'
           '    return f"--speculative-num-steps={n}"\n')
    assert flag_literals(src) == [(3, "--tp-size"), (6, "--speculative")]


def test_no_server_flag_spelled_in_python():
    files = [p for d in RULE_DIRS if (ROOT / d).is_dir() for p in sorted((ROOT / d).rglob("*.py"))
             if "tests" not in p.relative_to(ROOT).parts]
    assert any(p.parts[-2:] == ("compose", "render.py") for p in files)
    offenders = [f"{p.relative_to(ROOT)}:{line}: {flag}"
                 for p in files for line, flag in flag_literals(p.read_text(), str(p))]
    assert not offenders, ("server flags must live in YAML (conf/, sweep/sim/*.yaml), "
                           f"not in Python: {offenders}")
