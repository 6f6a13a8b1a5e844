"""The package's stages and what each may import (docs/architecture.md), read from the code.

    python tools/architecture.py            # list imports against the flow (none: exit 0)
    python tools/architecture.py --png F    # draw the stages and the imports between them into F

A module may import its own stage and the stages above it in `STAGES`, never one below: data never reaches the
Keras model, the online input pipeline (data) never imports the offline preparation (prepare), decode needs no model
code (so the server can use it), export never imports serving, and only the CLIs (bin/) import absl. On top of the
order, `NEVER` keeps the decoders and the servers off the model package altogether, and the library, export and
serving off the synthetic corpus' wing (synthetic/), also through what they import.
Importing a bin/ module defines its flags and does nothing else (`side_effects`). Each stage reads in one sitting:
no module over `MAX_MODULE_LINES` lines, no function over `MAX_FUNCTION_LINES` outside `SIZE_EXCEPTIONS` (`sizes`).
tests/test_architecture.py runs `violations`, `side_effects` and `sizes` on the repository.
"""

from __future__ import annotations

import argparse
import ast
import collections
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Folder -> import name (setup.cfg's package_dir).
FOLDERS = {"deepspeech2": "deepspeech2", "bin": "deepspeech2_cli", "export": "deepspeech2_export",
           "serving": "deepspeech2_serving", "synthetic": "deepspeech2_synthetic"}
# (stage, what it owns: module prefixes), in the order of the flow; the longest matching prefix decides. A prefix
# ending in "." owns the modules under it but not the package itself: "deepspeech2." is the library's catch-all, and
# the package's `__init__` (`deepspeech2`, the names a user imports) sits above the library it names.
STAGES = (
    ("base", ("deepspeech2.", "deepspeech2.configs", "deepspeech2.fileio", "deepspeech2.text",
              "deepspeech2.number_words", "deepspeech2.vocab",
              "deepspeech2.audio", "deepspeech2.progress", "deepspeech2.metrics")),
    ("features", ("deepspeech2.feature_config", "deepspeech2.features")),
    ("geometry", ("deepspeech2.model_config", "deepspeech2.geometry")),
    ("decode", ("deepspeech2.decode",)),
    ("data", ("deepspeech2.data",)),
    ("prepare", ("deepspeech2.prepare",)),
    ("model", ("deepspeech2.model",)),
    ("inference", ("deepspeech2.bundle", "deepspeech2.streaming", "deepspeech2.inference")),
    ("train", ("deepspeech2.train", "deepspeech2.evaluate")),
    ("api", ("deepspeech2",)),
    ("synthetic", ("deepspeech2_synthetic",)),
    ("export", ("deepspeech2_export",)),
    ("serving", ("deepspeech2_serving",)),
    ("cli", ("deepspeech2_cli",)),
)
CLI_ONLY = ("absl",)  # top-level packages only bin/ may import
# (importer, imported): module prefixes the importer never reaches, directly or through the modules it imports at any
# depth, though the flow allows it. The decoders take log-probabilities and ds2-serve and ds2-demo serve SavedModels:
# none of them needs the Keras model code. The synthetic corpus (its voices, engines and LM text) is a wing above the
# library for the demo and the tests: the library, the exporter and the servers work without it installed.
NEVER = (("deepspeech2.decode", "deepspeech2.model"), ("deepspeech2_serving", "deepspeech2.model"),
         ("deepspeech2", "deepspeech2_synthetic"), ("deepspeech2_export", "deepspeech2_synthetic"),
         ("deepspeech2_serving", "deepspeech2_synthetic"))
# A module or a function longer than these doesn't read in one sitting: split it by meaning, into named steps.
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80  # from its `def` line to its last, as `ast` counts them
# (qualified name, why it reads best whole, in a line): a module or a function allowed past its limit, e.g.
# ("deepspeech2.data.shards._make_shards", "..."). Empty: everything long splits into steps that read better.
SIZE_EXCEPTIONS: tuple[tuple[str, str], ...] = ()


def _owned(module: str, prefix: str) -> bool:
    """`module` is `prefix` or under it; a prefix ending in "." owns only what is under it."""
    return module.startswith(prefix) if prefix.endswith(".") else module == prefix or module.startswith(prefix + ".")


def stage(module: str) -> int | None:
    """The index in `STAGES` of the stage owning `module`, or None for a module outside the package."""
    best = None
    for i, (_, prefixes) in enumerate(STAGES):
        for prefix in prefixes:
            if _owned(module, prefix) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def modules(root: Path = REPO) -> dict[str, Path]:
    """Import name -> file, for every module of the `FOLDERS` under `root`."""
    out = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = [package, *path.relative_to(root / folder).with_suffix("").parts]
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(path: Path, known: set[str]) -> list[str]:
    """The absolute imports in `path`, at any depth (a function's import is a dependency too); `from pkg import
    mod` counts as `pkg.mod` when that is a module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known]
            out += subs or [node.module]
    return out


def edges(root: Path = REPO) -> list[tuple[str, str]]:
    """(importer, imported) module pairs inside the package."""
    found = modules(root)
    return [(mod, target) for mod, path in found.items() for target in imports(path, set(found))
            if stage(target) is not None]


def reached(start: str, found: dict[str, Path], prefix: str, own: str) -> list[str] | None:
    """The shortest chain of imports from `start` to a module under `prefix` (`start` first, that module last), or
    None when none of what `start` imports, at any depth, is under it. Modules under `own` (`start`'s side of the
    rule) are not followed: each answers for its own imports, so one bad import is one line."""
    chains = {start: [start]}
    queue = collections.deque([start])
    while queue:
        mod = queue.popleft()
        for target in imports(found[mod], set(found)) if mod in found else ():
            if target in chains:
                continue
            chains[target] = chains[mod] + [target]
            if _owned(target, prefix):
                return chains[target]
            if not _owned(target, own):
                queue.append(target)
    return None


def violations(root: Path = REPO) -> list[str]:
    """One line per import against the flow, and per module that reaches what `NEVER` keeps it from."""
    bad = []
    found = modules(root)
    for mod, path in found.items():
        for importer, imported in NEVER:
            chain = reached(mod, found, imported, importer) if _owned(mod, importer) else None
            if chain:
                through = f" (through {', '.join(chain[1:-1])})" if len(chain) > 2 else ""
                bad.append(f"{path.relative_to(root)}: {mod} imports {chain[-1]}{through}: {importer} never "
                           f"imports {imported}")
        own = stage(mod)
        for target in imports(path, set(found)):
            other = stage(target)
            if other is not None and other > own:
                bad.append(f"{path.relative_to(root)}: {mod} ({STAGES[own][0]}) imports {target} "
                           f"({STAGES[other][0]}, later in the flow)")
            if target.split(".")[0] in CLI_ONLY and STAGES[own][0] != "cli":
                bad.append(f"{path.relative_to(root)}: {mod} imports {target}: only bin/ may")
    return sorted(set(bad))


# What a bin/ module may do at its top level, besides imports, defs, classes and docstrings: define its flags.
# absl's `flags.*` calls (DEFINE_*, mark_flags_as_required, adopt_module_key_flags) and a bin helper's
# `define_flags(...)` register flags, the one thing a command must do at import for absl to parse them.
def _is_flag_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return (isinstance(func.value, ast.Name) and func.value.id == "flags") or func.attr == "define_flags"
    return isinstance(func, ast.Name) and func.id == "define_flags"


def _top_level_problem(node: ast.stmt) -> str | None:
    """Why `node`, a statement at a bin/ module's top level, is a side effect of importing it (None: it isn't)."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None
    if isinstance(node, ast.Try) and not node.orelse and not node.finalbody and all(
            isinstance(n, (ast.Import, ast.ImportFrom)) for n in node.body + [s for h in node.handlers for s in h.body]):
        return None  # `try: from . import x` / `except ImportError: import x` (python bin/ds2_x.py)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
        return None  # a docstring
    if isinstance(node, ast.Expr) and _is_flag_call(node.value):
        return None
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not all(isinstance(n, ast.Name) for t in targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])):
            return "an assignment to something else than a name of the module"
        # A constant, a name, a tuple of them: an assignment that calls nothing (or holds a flag it defines).
        if _is_flag_call(node.value) or not any(isinstance(n, ast.Call) for n in ast.walk(node.value)):
            return None
        return "an assignment that calls a function"
    if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__" and not node.orelse
            and [ast.literal_eval(c) for c in node.test.comparators] == ["__main__"]):
        return None
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return "a call"
    return f"a statement ({type(node).__name__})"


def side_effects(root: Path = REPO) -> list[str]:
    """One line per statement at the top level of a bin/ module that does something when the module is imported.

    Allowed there: imports (also in a `try` that falls back to another import), defs, classes, docstrings, assignments that call nothing (constants, names, tuples),
    flag definitions (`_is_flag_call`) and the `if __name__ == "__main__":` block. Anything else (quieting a
    library, creating an object, reading a file, an `if` or `try`) belongs in a function the command calls: what
    importing a command does must not depend on who imports it, or in what order.
    """
    bad = []
    for path in sorted((root / "bin").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            problem = _top_level_problem(node)
            if problem:
                code = ast.get_source_segment(path.read_text(encoding="utf-8"), node) or ""
                bad.append(f"{path.relative_to(root)}:{node.lineno}: {problem} at import: {code.splitlines()[0]}")
    return bad


def _functions(tree: ast.AST, prefix: str):
    """(qualified name, node) of every function in `tree`, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}.{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node
            yield from _functions(node, name)
        else:
            yield from _functions(node, prefix)


def sizes(root: Path = REPO, exceptions: tuple[tuple[str, str], ...] = SIZE_EXCEPTIONS) -> list[str]:
    """One line per module over `MAX_MODULE_LINES` lines and per function over `MAX_FUNCTION_LINES`, unless
    `exceptions` (`SIZE_EXCEPTIONS`) names it."""
    excepted = {name for name, _ in exceptions}
    bad = []
    for mod, path in modules(root).items():
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root)
        if len(text.splitlines()) > MAX_MODULE_LINES and mod not in excepted:
            bad.append(f"{where}: {len(text.splitlines())} lines, over {MAX_MODULE_LINES}: split it by meaning")
        for name, node in _functions(ast.parse(text, str(path)), mod):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and name not in excepted:
                bad.append(f"{where}:{node.lineno}: {name} is {length} lines, over {MAX_FUNCTION_LINES}: split it "
                           "into named steps, or list it in SIZE_EXCEPTIONS with the reason")
    return bad


def draw(out: Path, root: Path = REPO) -> None:
    """The stages as a matrix: row = the importing stage, column = the imported one, the number of module imports
    in the cell. The flow allows the lower triangle and the diagonal only; a cell above it is drawn red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(STAGES)
    counts = np.zeros((n, n), int)
    for a, b in edges(root):
        counts[stage(a), stage(b)] += 1
    sizes = collections.Counter(stage(m) for m in modules(root))
    fig, ax = plt.subplots(figsize=(8, 7))
    shade = np.where(np.triu(np.ones((n, n)), 1) > 0, np.nan, np.log1p(counts))
    ax.imshow(shade, cmap="Blues", vmin=0, vmax=np.log1p(counts.max()) * 1.3)
    for a in range(n):
        for b in range(n):
            if counts[a, b]:
                against = b > a
                ax.text(b, a, str(counts[a, b]), ha="center", va="center", fontsize=9,
                        color="red" if against else "black", fontweight="bold" if against else "normal")
            elif b > a:
                ax.text(b, a, "·", ha="center", va="center", color="#bbb")
    labels = [f"{name} ({sizes[i]})" for i, (name, _) in enumerate(STAGES)]
    ax.set_xticks(range(n), [name for name, _ in STAGES], rotation=45, ha="right")
    ax.set_yticks(range(n), labels)
    ax.set_xlabel("imported stage")
    ax.set_ylabel("importing stage (modules)")
    ax.set_title("Module imports between the stages, in the order of the flow\n(above the diagonal: against it)", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--png", help="draw the stages and their imports into this PNG")
    args = parser.parse_args()
    if args.png:
        draw(Path(args.png))
    bad = violations() + side_effects() + sizes()
    print("\n".join(bad) or "no import against the flow, no side effect of importing a command, nothing too long")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
