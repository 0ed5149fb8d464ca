"""docs/contributing.md's table "Where each rule lives" names places that exist.

One row per rule of the contract, 1 to 36. In its cells, backticked text is
checked: a path (``src/...``, ``docs/...``, ``tests/...``) exists; a path with
``::name`` has a function or class of that name (a test: ``def name(``);
``queries.sql: a, b`` names statements of both dialects' ``queries.sql``, or of
the one dialect a dialect-only statement belongs to. A rule that some
``test_rule_NN_...`` function checks names at least one of them, so a row
cannot go on saying "none yet" once tests exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from backends.test_queries_parity import DIALECT_ONLY, DIALECTS, statement_names

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "contributing.md"
HEADING = "## Where each rule lives"
RULES = list(range(1, 42))
COLUMNS = ("Rule", "Promise", "Where", "Statements", "Tests")

_SPAN = re.compile(r"`([^`]+)`")
_TEST_RULE = re.compile(r"^\s*(?:async\s+)?def (test_rule_(\d\d)_\w+)\(", re.MULTILINE)


@dataclass(frozen=True)
class Row:
    rule: int
    promise: str
    where: str
    statements: str
    tests: str


def rows(text: str) -> list[Row]:
    """The rows of the table under HEADING."""
    lines = text.splitlines()
    start = lines.index(HEADING)
    table = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    header, rule_line, *body = (_cells(line) for line in table)
    assert tuple(header) == COLUMNS, f"the table's columns are {header}, not {COLUMNS}"
    assert all(set(c) <= set("-: ") for c in rule_line)
    found = []
    for cells in body:
        assert len(cells) == len(COLUMNS), f"row {cells} has not {len(COLUMNS)} cells"
        assert cells[0].isdigit(), f"row {cells}: the first cell is not a rule number"
        found.append(Row(int(cells[0]), *cells[1:]))
    return found


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


@cache
def page_rows() -> list[Row]:
    return rows(PAGE.read_text(encoding="utf-8"))


@cache
def names_of(dialect: str) -> frozenset[str]:
    return frozenset(statement_names(dialect))


@cache
def rule_test_functions() -> dict[int, frozenset[str]]:
    """Per rule number, the ``test_rule_NN_...`` functions anywhere under tests/."""
    found: dict[int, set[str]] = {}
    for path in (ROOT / "tests").rglob("*.py"):
        for name, number in _TEST_RULE.findall(path.read_text(encoding="utf-8")):
            found.setdefault(int(number), set()).add(name)
    return {rule: frozenset(names) for rule, names in found.items()}


def _defines(path: Path, name: str, tests_only: bool) -> bool:
    kinds = r"(?:async\s+)?def" if tests_only else r"(?:(?:async\s+)?def|class)"
    return re.search(rf"^\s*{kinds} {re.escape(name)}\b", path.read_text(encoding="utf-8"),
                     re.MULTILINE) is not None


def place_problems(span: str, roots: tuple[str, ...]) -> list[str]:
    """What is wrong with one backticked place: ``path`` or ``path::name``."""
    path_text, _, name = span.partition("::")
    if not path_text.startswith(roots):
        return [f"`{span}` is not a path under {', '.join(roots)}"]
    path = ROOT / path_text
    if not path.exists():
        return [f"`{span}`: {path_text} does not exist"]
    if name:
        tests_only = path_text.startswith("tests/")
        if not path.is_file() or not _defines(path, name, tests_only):
            what = "test function" if tests_only else "function or class"
            return [f"`{span}`: {path_text} has no {what} named {name}"]
    return []


def statement_problems(span: str) -> list[str]:
    """What is wrong with one ``queries.sql: a, b`` cell entry."""
    if not span.startswith("queries.sql:"):
        return [f"`{span}` is not of the form `queries.sql: name, name`"]
    problems = []
    for name in (n.strip() for n in span.removeprefix("queries.sql:").split(",")):
        only = [d for d in DIALECTS if name in DIALECT_ONLY[d]]
        wanted = only or list(DIALECTS)
        missing = [d for d in wanted if name not in names_of(d)]
        if not name or missing:
            problems.append(f"statement {name!r} is missing from the queries.sql of "
                            f"{', '.join(missing) or 'every dialect'}")
    return problems


def row_problems(row: Row) -> list[str]:
    """Everything wrong with one row of the table."""
    problems = []
    where = _SPAN.findall(row.where)
    for span in where:
        problems += place_problems(span, ("src/", "docs/"))
    if not where and "not yet" not in row.where:
        problems.append("Where names no place and does not say 'not yet'")

    statements = _SPAN.findall(row.statements)
    for span in statements:
        problems += statement_problems(span)
    if not statements and row.statements != "none":
        problems.append("Statements names no `queries.sql: ...` and is not 'none'")

    tests = _SPAN.findall(row.tests)
    for span in tests:
        problems += place_problems(span, ("tests/",))
    if not tests and row.tests != "none yet":
        problems.append("Tests names no test and is not 'none yet'")

    named = {span.partition("::")[2] for span in tests}
    existing = rule_test_functions().get(row.rule, frozenset())
    if existing and not named & existing:
        problems.append(f"names none of the tests of rule {row.rule}, such as "
                        f"{sorted(existing)[0]}")
    return [f"rule {row.rule}: {p}" for p in problems]


def test_every_rule_has_exactly_one_row_in_order() -> None:
    assert [row.rule for row in page_rows()] == RULES


@pytest.mark.parametrize("rule", RULES)
def test_every_place_the_row_names_exists(rule: int) -> None:
    (row,) = [r for r in page_rows() if r.rule == rule]
    assert row.promise, f"rule {rule} has no short name"
    assert row_problems(row) == []


def test_the_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    assert re.search(r"^\s+- [^:\n]+: contributing\.md$", nav, re.MULTILINE)


def test_the_checks_find_wrong_places() -> None:
    bad = Row(9, "Ack", "`src/hailq/nowhere.py`, `src/hailq/queue.py::no_such_method`",
              "`queries.sql: message_ack, no_such_statement, clock_now`",
              "`tests/conformance/test_rules_leases.py::test_rule_09_no_such_test`, "
              "`hailq ack`")
    problems = "\n".join(row_problems(bad))

    assert "src/hailq/nowhere.py does not exist" in problems
    assert "has no function or class named no_such_method" in problems
    assert "'no_such_statement' is missing from the queries.sql of sqlite, postgres" in problems
    assert "'message_ack'" not in problems
    assert "'clock_now'" not in problems  # a PostgreSQL-only statement, found there
    assert "has no test function named test_rule_09_no_such_test" in problems
    assert "`hailq ack` is not a path under tests/" in problems
    assert "names none of the tests of rule 9" in problems


def test_a_row_without_places_must_say_so() -> None:
    # A rule number no test is named after (rule 35 was, before its tests came).
    empty = Row(99, "Not a rule yet", "", "", "")
    said = Row(99, "Not a rule yet", "not yet", "none", "none yet")

    assert len(row_problems(empty)) == 3
    assert row_problems(said) == []


def test_the_table_is_read_from_its_heading_to_its_end() -> None:
    text = "\n".join([
        "# Page", "| A | B |", "| - | - |", "| x | y |", HEADING, "",
        "| Rule | Promise | Where | Statements | Tests |", "| --- | --- | --- | --- | --- |",
        "| 1 | Declare | `src/hailq/broker.py` | none | none yet |", "", "| 2 | after |"])

    assert rows(text) == [Row(1, "Declare", "`src/hailq/broker.py`", "none", "none yet")]
