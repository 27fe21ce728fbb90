"""Spec files: the leaderboard's one-case-per-line grammar, and task.yml.

A line holds `key: value` pairs separated by `;`. A value is an integer, a word, or a
list `[1, 2]` / tuple `(1, 2)` of integers. Blank lines are skipped. Every case must give
exactly m, n, k (g entries each), g and seed, with sizes the contract allows (docs/PROBLEM.md).
Anything else is a SpecError (exit 113).
"""

import dataclasses
import re
from pathlib import Path

PAIR = re.compile(r"\s*([a-zA-Z_]+)\s*:\s*(\[[^\]]*\]|\([^)]*\)|[a-zA-Z_]+|[+-]?[0-9]+)\s*")
CASE_KEYS = ("m", "n", "k", "g", "seed")
K_MULTIPLE = 64  # K fills whole 4-column atoms of 16-element scale blocks


class SpecError(Exception):
    """An unreadable spec file or an invalid case line."""


@dataclasses.dataclass
class TestCase:
    args: dict
    spec: str


def combine_seed(a: int, b: int) -> int:
    """Cantor pairing of a case's public seed with the secret seed: a large secret gives a large seed."""
    return int(a + (a + b) * (a + b + 1) // 2)


def _parse_value(text: str):
    if text[0] in "[(":
        inner = text[1:-1].strip()
        try:
            return tuple(int(x) for x in inner.split(",")) if inner else ()
        except ValueError:
            raise SpecError(f"a list may hold integers only: '{text}'") from None
    try:
        return int(text)
    except ValueError:
        return text


def parse_line(line: str) -> dict:
    case = {}
    for part in line.split(";"):
        matched = PAIR.fullmatch(part)
        if not matched:
            raise SpecError(f"invalid test case: '{line}': '{part}'")
        if matched[1] in case:
            raise SpecError(f"invalid test case: '{line}': {matched[1]} is given twice")
        try:
            case[matched[1]] = _parse_value(matched[2])
        except SpecError as e:
            raise SpecError(f"invalid test case: '{line}': {e}") from None
    return case


def _integer(value) -> bool:
    """An integer of the spec: an int, not a bool (YAML's true), a float or a word."""
    return type(value) is int


def validate_case(case: dict, where: str) -> None:
    missing = [key for key in CASE_KEYS if key not in case]
    extra = [key for key in case if key not in CASE_KEYS]
    if missing or extra:
        raise SpecError(f"{where}: needs exactly the keys {', '.join(CASE_KEYS)} (missing {missing}, unknown {extra})")
    g = case["g"]
    if not _integer(g) or g < 1 or not _integer(case["seed"]):
        raise SpecError(f"{where}: g must be a positive integer and seed an integer")
    for key in "mnk":
        dims = case[key]
        if not isinstance(dims, tuple) or len(dims) != g or not all(_integer(d) and d >= 0 for d in dims):
            raise SpecError(f"{where}: {key} must be a list of {g} non-negative integers, got {dims!r}")
    if any(k <= 0 or k % K_MULTIPLE for k in case["k"]):
        raise SpecError(
            f"{where}: every k must be a positive multiple of {K_MULTIPLE} (docs/PROBLEM.md, the sizes the contract "
            f"allows), got {list(case['k'])}"
        )


def format_case(case: dict) -> str:
    """The canonical spec line of a case: `m: [..]; n: [..]; k: [..]; g: G; seed: S`."""
    parts = []
    for key in CASE_KEYS:
        value = case[key]
        parts.append(f"{key}: [{', '.join(map(str, value))}]" if isinstance(value, tuple) else f"{key}: {value}")
    return "; ".join(parts)


def _yaml_cases(path: Path, section: str) -> list[tuple[str, dict]]:
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        """YAML that refuses a key given twice in one mapping (plain YAML keeps the last)."""

    def mapping(loader, node):
        keys = [loader.construct_object(key) for key, _ in node.value]
        twice = sorted({str(key) for key in keys if keys.count(key) > 1})
        if twice:
            raise yaml.constructor.ConstructorError(None, None, f"{twice[0]} is given twice", node.start_mark)
        return loader.construct_mapping(node)

    UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        doc = yaml.load(path.read_text(), Loader=UniqueKeys)  # a SafeLoader: plain data only
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise SpecError(f"could not read {path}: {e}") from e
    entries = doc.get(section) if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise SpecError(f"{path} has no list named '{section}'")
    cases = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SpecError(f"{path}: {section}[{i}] is not a mapping")
        case = {key: tuple(v) if isinstance(v, list) else v for key, v in entry.items()}
        validate_case(case, f"{path}: {section}[{i}]")
        cases.append((format_case(case), case))
    return cases


def _line_cases(path: Path) -> list[tuple[str, dict]]:
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"Could not open test file `{path}`: {e}") from e
    cases = []
    for line in lines:
        if line.strip():
            case = parse_line(line)
            validate_case(case, f"invalid test case: '{line}'")
            cases.append((line, case))
    return cases


def read_cases(file_name: str, section: str, secret_seed: int | None) -> list[TestCase]:
    """The cases of a spec file; for a .yml/.yaml file, those of its list `section`."""
    path = Path(file_name)
    if path.suffix in (".yml", ".yaml"):
        cases = _yaml_cases(path, section)
    else:
        cases = _line_cases(path)
    if not cases:
        raise SpecError(f"{file_name} holds no cases")
    tests = []
    for line, case in cases:
        if secret_seed is not None:
            case["seed"] = combine_seed(case["seed"], secret_seed)
        tests.append(TestCase(args=case, spec=line))
    return tests
