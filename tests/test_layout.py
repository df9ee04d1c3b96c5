"""The package's layout, pinned by wings (the folders), not by module names.

Each wing may import only the wings listed for it in ``WINGS`` (the arrows point down:
rules, then the contract, the model and storage, then the engine, then the faces, then
the program that wires them, ``launch``); no face imports storage or the model (they go
through ``MemoryService``); the core imports nothing of the faces' frameworks; and no two
modules import each other, directly or around a loop, anywhere in the package. Imports
are read from the source (``ast``: every ``import`` statement, those under
``TYPE_CHECKING`` and inside functions included), so an arrow that is only taken at run
time counts too.

The wings stand on floors, computed from those imports (:func:`floors`): a wing's floor
is one above the highest floor it imports from. The four faces (``FACES``) share one
floor above the engine's, and the one arrow between two of them is the HTTP app mounting
MCP's server and transports (``MOUNTED``), which puts the two side by side, not one above
the other.

Sizes are reported, never enforced: ``python tests/test_layout.py`` prints the figures
(wings, floors, modules at the top, cycles, face-to-storage imports, the largest modules
and classes, mypy's strict scope).
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "wontopos_mcp"

# What each wing may import besides itself. A wing is a sub-package (``rules``) or a
# module at the top (``errors``); ``""`` is the package's own ``__init__``.
WINGS: dict[str, set[str]] = {
    "errors": set(),
    "rules": {"errors"},
    "contract": {"errors", "rules"},
    "verbs": {"errors", "contract"},
    "model": {"errors"},
    "storage": {"errors", "rules", "model"},
    "imports": {"errors", "rules"},
    "engine": {"errors", "rules", "contract", "model", "storage", "imports"},
    "config": {"errors", "rules", "model", "contract"},  # the tool profiles a setting names
    "logs": set(),
    "version": set(),
    "library": {"errors", "rules", "contract", "verbs", "config", "imports", "engine"},
    "mcp": {"version", "errors", "rules", "contract", "verbs", "engine"},
    "http": {"version", "errors", "rules", "contract", "verbs", "config", "imports", "engine", "mcp"},
    "cli": {"version", "errors", "rules", "contract", "verbs", "config", "logs", "imports", "engine"},
    "": {"errors", "library", "version"},
    "launch": {"cli", "mcp", "http", "config", "engine"},
    "__main__": {"launch"},
}
# The modules of the MCP wing another face may import: the server and the transports the
# HTTP app mounts. A rule two faces share lives below them (``rules``), never in one face
# for the other to reach (``rules.json_values``, once ``mcp.jsonrpc``'s); what the command
# line serves is handed to it from above (``launch``).
MOUNTED = {"wontopos_mcp.mcp.server", "wontopos_mcp.mcp.transport"}
CORE = ("rules", "contract", "model", "storage", "imports", "engine")
FACES = ("mcp", "http", "cli", "library")
FORBIDDEN_IN_CORE = ("mcp", "starlette", "uvicorn", "anyio", "pydantic")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def wing(module: str) -> str:
    """``wontopos_mcp.storage.locks.lease`` -> ``storage``; ``wontopos_mcp`` -> ``""``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports(module: str) -> tuple[set[str], set[str]]:
    """(our modules, third-party top-level packages) that ``module`` imports."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    ours: set[str] = set()
    others: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "wontopos_mcp":
                others.add(target.split(".")[0])
                continue
            named = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in MODULES]
            ours.update(named or [target])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                (ours if top == "wontopos_mcp" else others).add(alias.name if top == "wontopos_mcp" else top)
    return ours, others


def import_cycles() -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), or a self-import."""
    graph = {module: {t for t in imports(module)[0] if t in MODULES and t != module} for module in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def mounts(module: str, target: str) -> bool:
    """Whether ``module`` importing ``target`` is the HTTP app mounting MCP's server or
    transports: an arrow between two faces that stand side by side."""
    return wing(module) == "http" and target in MOUNTED


def wing_arrows() -> dict[str, set[str]]:
    """Wing -> the other wings its modules import, mounts left out (:func:`mounts`)."""
    arrows: dict[str, set[str]] = {wing(module): set() for module in MODULES}
    for module in MODULES:
        for target in imports(module)[0]:
            if target in MODULES and wing(target) != wing(module) and not mounts(module, target):
                arrows[wing(module)].add(wing(target))
    return arrows


def floors(arrows: dict[str, set[str]] | None = None) -> dict[str, int]:
    """Wing -> its floor: 0 for a wing that imports no other, else one above the highest
    floor among the wings it imports (``arrows``, the package's own by default)."""
    arrows = wing_arrows() if arrows is None else arrows
    found: dict[str, int] = {}

    def floor(name: str, climbing: tuple[str, ...]) -> int:
        if name in climbing:
            raise ValueError(f"the wings import each other: {' -> '.join((*climbing, name))}")
        if name not in found:
            below = [floor(lower, (*climbing, name)) for lower in arrows.get(name, set())]
            found[name] = 1 + max(below) if below else 0
        return found[name]

    for name in arrows:
        floor(name, ())
    return found


def between_faces() -> set[tuple[str, str]]:
    """(face module, module of another face) for every such import, mounts included."""
    return {
        (module, target)
        for module in MODULES
        if wing(module) in FACES
        for target in imports(module)[0]
        if wing(target) in FACES and wing(target) != wing(module)
    }


def face_reaches_into_the_core() -> Iterator[tuple[str, str]]:
    """(face module, storage or model module) for every such import."""
    for module in MODULES:
        if wing(module) in FACES:
            for target in imports(module)[0]:
                if wing(target) in ("storage", "model"):
                    yield module, target


# -- the rules --------------------------------------------------------------------------------------


def test_every_module_belongs_to_a_wing_and_every_wing_says_what_it_owns() -> None:
    assert {wing(module) for module in MODULES} <= set(WINGS), "a new wing: give it its place in WINGS"
    for module, path in MODULES.items():
        if path.name == "__init__.py" and module != "wontopos_mcp":
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            assert "import" in doc, f"{module}: say what it owns and what it may import"
            assert len(doc) > 150, f"{module}: say what it owns and what it may import"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_wing_and_the_wings_below(module: str) -> None:
    reached = {wing(target) for target in imports(module)[0]} - {wing(module)}
    assert reached <= WINGS[wing(module)], f"{module} imports {sorted(reached - WINGS[wing(module)])}"


def test_no_import_cycle_anywhere_in_the_package() -> None:
    assert import_cycles() == []


def test_no_face_imports_storage_or_the_model() -> None:
    assert list(face_reaches_into_the_core()) == []


def test_the_only_arrow_between_faces_is_http_mounting_mcps_server_and_transports() -> None:
    reached = between_faces()
    assert {(wing(module), wing(target)) for module, target in reached} == {("http", "mcp")}
    assert {target for _, target in reached} <= MOUNTED


def test_the_faces_share_one_floor_above_the_engine_and_below_the_program() -> None:
    floor = floors()
    assert {floor[face] for face in FACES} == {floor["mcp"]}
    assert floor["mcp"] > floor["engine"]
    assert floor["launch"] > floor["mcp"]
    assert floor["__main__"] > floor["launch"]


def test_floors_climb_with_each_import_and_refuse_a_loop() -> None:
    assert floors({"a": set(), "b": {"a"}, "c": {"a", "b"}, "d": set()}) == {"a": 0, "b": 1, "c": 2, "d": 0}
    with pytest.raises(ValueError, match="a -> b -> a"):
        floors({"a": {"b"}, "b": {"a"}})


@pytest.mark.parametrize("module", sorted(m for m in MODULES if wing(m) in CORE))
def test_the_core_imports_no_face_framework(module: str) -> None:
    assert imports(module)[1] & set(FORBIDDEN_IN_CORE) == set()


@pytest.mark.slow
def test_the_readers_see_arrows_and_cycles() -> None:
    """The checks above could pass by reading nothing: the service imports its parts, and
    a loop between two modules is found."""
    ours, others = imports("wontopos_mcp.engine.service")
    assert {"wontopos_mcp.engine.registry", "wontopos_mcp.engine.writes", "wontopos_mcp.engine.bootstrap"} <= ours
    assert "threading" in others
    assert wing("wontopos_mcp.storage.locks.lease") == "storage"
    assert wing("wontopos_mcp") == ""
    saved = dict(MODULES)
    try:
        probe = PACKAGE / "engine" / "service.py"
        MODULES["wontopos_mcp.engine.registry"] = probe  # registry "imports" what service imports
        assert any("wontopos_mcp.engine.registry" in group for group in import_cycles())
    finally:
        MODULES.clear()
        MODULES.update(saved)


# -- tests reach the package through public names ---------------------------------------------

TESTS = ROOT / "tests"
# Private names of other libraries that tests read: argparse's (the sub-parsers of our
# parser, to print one command's help) and the ``wontopos`` SDK client's base URL.
FOREIGN_PRIVATE = frozenset({"_subparsers", "_group_actions", "_actions", "_base"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _tests_own_private_names() -> set[str]:
    """The private names the tests' own classes define (their fakes' and helpers' methods
    and the attributes they set on ``self``): ``x._name`` of one of these is the tests' own."""
    names: set[str] = set()
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names |= {item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
    return {name for name in names if _private(name)}


def private_reaches(path: Path, own: set[str]) -> list[str]:
    """Each reach of a test file into a private name of the package, as ``line: what``:
    ``from wontopos_mcp... import _name``, and ``x._name`` unless ``x`` is ``self`` or
    ``cls`` or ``_name`` is one the tests' classes define (``own``) or another library's
    (:data:`FOREIGN_PRIVATE`)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "wontopos_mcp":
            found += [f"{node.lineno}: from {node.module} import {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}"
                for a in node.names
                if a.name.split(".")[0] == "wontopos_mcp" and any(map(_private, a.name.split(".")))
            ]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            mine = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not mine and node.attr not in own and node.attr not in FOREIGN_PRIVATE:
                found.append(f"{node.lineno}: .{node.attr}")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def all_private_reaches() -> dict[str, list[str]]:
    """Test file (relative to tests/) -> its private reaches, for every file that has one."""
    own = _tests_own_private_names()
    reaches = {str(path.relative_to(TESTS)): private_reaches(path, own) for path in sorted(TESTS.rglob("*.py"))}
    return {path: found for path, found in reaches.items() if found}


def test_tests_reach_the_package_only_through_public_names() -> None:
    """Seeding and inspection go through public operations (``tests/support.py``); a seam
    a test needs is a public name with a docstring saying why."""
    assert all_private_reaches() == {}


def test_the_reach_counter_sees_a_private_import_and_attribute(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "from wontopos_mcp.cli.main import _hidden\nservice._resolve(None)\nself._mine = 1\nparser._subparsers\n"
    )
    assert private_reaches(probe, {"_mine"}) == ["1: from wontopos_mcp.cli.main import _hidden", "2: ._resolve"]


# -- docstrings and comments say the rule, not where a document outside the repo says it -----

SPEC_WORD = re.compile(r"\bSPEC\b")


def spec_citations(path: Path) -> list[tuple[int, str]]:
    """Each comment and each string standing alone as a statement (docstrings, attribute
    docs) of ``path`` that names the contract document (``SPEC_WORD``), as (line, text); a
    string a value holds is not one."""
    text = path.read_text(encoding="utf-8")
    found = [
        (token.start[0], token.string.lstrip("# "))
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT and SPEC_WORD.search(token.string)
    ]
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and SPEC_WORD.search(node.value.value)
        ):
            found.append((node.lineno, node.value.value))
    return sorted(found)


# The memory browser's scripts. A string or template literal is read past, so a ``//`` or
# a ``/*`` inside one starts no comment; a regular expression literal is read as code,
# which is safe while none holds a quote or a comment mark (the reader's test below fails
# when one hides a comment that begins a line).
UI_SCRIPTS = sorted((PACKAGE / "http" / "ui").glob("*.js"))
SCRIPT_TOKEN = re.compile(
    r"""("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(//[^\n]*|/\*.*?\*/)""", re.DOTALL
)


def script_comments(path: Path) -> list[tuple[int, str]]:
    """Each comment of the script ``path`` (``//`` to the end of its line, ``/* ... */``),
    as (line it starts on, text)."""
    text = path.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 1, match.group(2))
        for match in SCRIPT_TOKEN.finditer(text)
        if match.group(2)
    ]


def script_spec_citations(path: Path) -> list[tuple[int, str]]:
    """Each comment of the script ``path`` that names the contract document, as (line, text)."""
    return [(line, text) for line, text in script_comments(path) if SPEC_WORD.search(text)]


def text_spec_citations(path: Path) -> list[tuple[int, str]]:
    """Each line of the prose file ``path`` that names the contract document."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(number, line) for number, line in enumerate(lines, 1) if SPEC_WORD.search(line)]


# Where citations are counted, each allowed none: the package's modules, every Python file
# of the tests (``support.py`` and the conftests included), the memory browser's scripts,
# the benchmarks, the README and the pages of docs/
CITING_SCOPES = {
    "package": lambda: [(path, spec_citations(path)) for path in MODULES.values()],
    "tests": lambda: [(path, spec_citations(path)) for path in sorted(TESTS.rglob("*.py"))],
    "ui scripts": lambda: [(path, script_spec_citations(path)) for path in UI_SCRIPTS],
    "bench": lambda: [(path, spec_citations(path)) for path in sorted((ROOT / "bench").glob("*.py"))],
    "readme": lambda: [(ROOT / "README.md", text_spec_citations(ROOT / "README.md"))],
    "docs": lambda: [(path, text_spec_citations(path)) for path in sorted((ROOT / "docs").glob("*.md"))],
}


def all_spec_citations(scope: str) -> dict[str, list[tuple[int, str]]]:
    """File (relative to the repository) -> its citations, for every file of ``scope`` (a
    key of ``CITING_SCOPES``) that has one."""
    return {str(path.relative_to(ROOT)): found for path, found in CITING_SCOPES[scope]() if found}


@pytest.mark.parametrize("scope", sorted(CITING_SCOPES))
def test_docstrings_and_comments_state_each_rule_instead_of_citing_spec(scope: str) -> None:
    """The contract document is not in the repository: a reader sent to it learns nothing,
    so a docstring or comment says what the rule is (and why, where that matters)."""
    assert {path: [line for line, _ in found] for path, found in all_spec_citations(scope).items()} == {}


def test_the_citation_finder_sees_comments_and_docstrings_but_not_values(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Module (SPEC "Errors")."""\n'
        "LIMIT = 50  # SPEC: 50\n"
        "NOTE = 'SPEC in a value'\n"
        "def f():\n"
        '    """SPEC.md says so."""\n'
        "    return 'SPECS'  # no citation\n"
    )
    assert [line for line, _ in spec_citations(probe)] == [1, 2, 5]


def test_the_script_citation_finder_sees_both_comment_forms_but_not_strings(tmp_path: Path) -> None:
    probe = tmp_path / "probe.js"
    probe.write_text(
        "// SPEC: 50\n"
        'const a = "SPEC in a value // no comment";\n'
        "/** What it does\n"
        ' * (SPEC "Errors"). */\n'
        "const b = `SPEC ${a} /* no comment */`;  // SPECS is no citation\n"
        "const c = 'it\\'s // no comment'; /* SPEC */\n"
    )
    assert [line for line, _ in script_spec_citations(probe)] == [1, 3, 6]
    assert len(script_comments(probe)) == 4


@pytest.mark.parametrize("path", UI_SCRIPTS, ids=lambda path: path.name)
def test_the_script_reader_finds_every_comment_of_the_page(path: Path) -> None:
    """A quote the reader took for the start of a string would hide the comments after it:
    every line of a script that begins with ``//`` or ``/*`` begins a comment it found."""
    found = {line for line, _ in script_comments(path)}
    lines = enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
    marked = {number for number, text in lines if text.lstrip().startswith(("//", "/*"))}
    assert marked, path.name
    assert marked - found == set()


def report() -> str:
    """The layout's figures, for the closing note of a change that moves files."""
    sizes = []
    classes = []
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        sizes.append((text.count("\n"), module))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                classes.append((node.end_lineno - node.lineno + 1, f"{module}.{node.name}"))
    wings = sorted({wing(m) for m, p in MODULES.items() if p.name == "__init__.py" and wing(m)})
    top = sorted(m for m, p in MODULES.items() if m.count(".") == 1 and p.name != "__init__.py")
    by_floor: dict[int, list[str]] = {}
    for name, number in floors().items():
        by_floor.setdefault(number, []).append(name or "(package)")
    lines = [
        f"wings (sub-packages)      {len(wings)}: {', '.join(wings)}",
        "floors                    " + "; ".join(f"{n} {', '.join(sorted(by_floor[n]))}" for n in sorted(by_floor)),
        f"modules at the top        {len(top)}: {', '.join(m.split('.')[1] for m in top)}",
        f"modules in all            {len(MODULES)}",
        f"import cycles             {len(import_cycles())}",
        f"face -> storage/model     {len(list(face_reaches_into_the_core()))}",
        "largest modules          "
        + ", ".join(f"{m.removeprefix('wontopos_mcp.')} {n}" for n, m in sorted(sizes)[-5:]),
        "largest classes          "
        + ", ".join(f"{c.removeprefix('wontopos_mcp.')} {n}" for n, c in sorted(classes)[-5:]),
    ]
    lines.append(f"mypy strict scope         {_mypy_scope()}")
    reaches = all_private_reaches()
    lines.append(f"private reaches (tests)   {sum(map(len, reaches.values()))} in {len(reaches)} files")
    lines += [f"  {path}  {', '.join(found)}" for path, found in reaches.items()]
    for scope in CITING_SCOPES:
        cited = all_spec_citations(scope)
        lines.append(f"{f'SPEC cited ({scope})':<26}{sum(map(len, cited.values()))} in {len(cited)} files")
        lines += [f"  {path}  {', '.join(str(line) for line, _ in found)}" for path, found in cited.items()]
    return "\n".join(lines)


def _mypy_scope() -> str:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    relaxed = [o["module"] for o in mypy.get("overrides", []) if o.get("disallow_untyped_calls") is False]
    scope = ", ".join(mypy["files"]) if mypy.get("strict") else "none"
    return scope + (f" (untyped calls allowed in {', '.join(relaxed)})" if relaxed else "")


if __name__ == "__main__":
    sys.exit(print(report()))


# -- the seams the layout promises ----------------------------------------------------------------


def test_write_coordination_is_chosen_by_the_database_uri(tmp_path: Path) -> None:
    from wontopos_mcp.storage.locks.coordination import (
        LOCK_FILE,
        FileLockCoordinator,
        InProcessCoordinator,
        LeaseCoordinator,
        coordinator_for,
    )

    local = coordinator_for(str(tmp_path / "db"))
    assert isinstance(local, FileLockCoordinator)
    for uri in ("s3://bucket/db", "s3+ddb://bucket/db?ddbTableName=t", "gs://bucket/db", "az://container/db"):
        for writers in ("single", "leased"):
            chosen = coordinator_for(uri, writers=writers)
            assert isinstance(chosen, LeaseCoordinator)
            assert chosen.mode == writers
    assert type(coordinator_for("db://cloud-db")) is InProcessCoordinator  # LanceDB Cloud: best effort
    local.attach()
    with local.hold(), local.hold():  # re-entrant for the thread that holds it
        assert (tmp_path / "db" / LOCK_FILE).exists()


def test_the_offline_switch_of_the_default_model_is_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from wontopos_mcp.model.embeddings import hub_offline

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with hub_offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in os.environ
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user's choice is never overridden
    with hub_offline():
        assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert os.environ["HF_HUB_OFFLINE"] == "0"


@pytest.mark.slow
def test_a_store_left_out_of_store_create_is_the_default_store_in_the_core(tmp_path: Path) -> None:
    from wontopos_mcp.engine.service import MemoryService
    from wontopos_mcp.model.embeddings import ModelLoader
    from wontopos_mcp.storage.adapter import Store

    service = MemoryService(Store(str(tmp_path / "db")), ModelLoader(lambda: None, model="unused"))  # type: ignore[arg-type,return-value]
    try:
        assert service.store_create() == {"user_id": "default", "status": "exists"}
        assert service.store_create(None) == {"user_id": "default", "status": "exists"}
        assert [s["user_id"] for s in service.stores_list()["stores"]] == ["default"]
    finally:
        service.close()
