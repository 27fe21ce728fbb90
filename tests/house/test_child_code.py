"""Code the tests hand to child Python processes (strings given to `python -c`) imports this
repository's modules by the names they have: such code is only text to the linters, and a stale name
fails only on the machine that runs it (a GPU's, for most of it)."""

import ast
import importlib.util
import re

from conftest import ROOT

IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w., ]+))", re.MULTILINE)
PACKAGES = ("nvfp4", "harness", "tools", "bench", "examples")
SCRIPTS = {p.stem for folder in ("tools", "bench") for p in (ROOT / folder).glob("*.py")} - {"__init__"}  # modules of a package


def imported_modules(text: str) -> list[str]:
    names = []
    for source, plain in IMPORT.findall(text):
        names += [source] if source else [n.strip().split(" as ")[0] for n in plain.split(",")]
    return [n for n in names if n and not n.startswith(".")]


def test_code_in_strings_imports_the_repositorys_modules_by_their_names():
    wrong = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value):
                continue
            for name in imported_modules(node.value):
                top = name.split(".")[0]
                if top in SCRIPTS or (top in PACKAGES and importlib.util.find_spec(name) is None):
                    wrong.append(f"{path.relative_to(ROOT)}: {name}")
    assert wrong == [], wrong
