"""The commands a user can copy from README.md and docs/*.md, and how each is checked.

Every fenced ```bash / ```sh / ```shell / ```console block is split into commands (continuation lines
joined, comments and `$ ` prompts dropped, `&&` / `;` / `|` chains split). Each command is read as a
launcher chain ending in a target:

    [VAR=value ...] (torchrun | python -m torch.distributed.run | accelerate launch) [opts] TARGET [args]
    [VAR=value ...] python -m torch_neuronx.plan run [opts] -- TARGET [args]
    [VAR=value ...] python SCRIPT.py [args] | python -m MODULE [args] | neuron-ls ... (console scripts)
    pip install ... | export ... | .ci/SCRIPT ...

and checked against the repository as it is: the script exists, the module is importable, every `--flag`
is in the `--help` output of the program that reads it, every TORCH_NEURONX_* variable is read somewhere
in torch_neuronx/, every `pip install` extra is in pyproject.toml. `tests/test_docs_commands.py` fails
on any that is not; `python -m tests.docs_commands --write` regenerates tests/documented-commands.md,
the table of every command with the tests that run its target (the test checks that table is current).

A bare `NAME.py` that is not in the repository (`train.py`, `script.py`) is the user's own script,
`<...>`, `[...]` and `...` are placeholders the reader fills in, and a `benchmarks/` script runs on
demand, not in a test (its timings need a quiet machine: benchmarks/README.md); its options are checked.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "tests" / "documented-commands.md"
FENCES = ("bash", "sh", "shell", "console")
FLAG = re.compile(r"(?<![\w-])(--[A-Za-z0-9][\w.-]*)")
ENV_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
LAUNCHERS = {  # a launcher's own options come first, then the program it starts
    ("torchrun",): ["-m", "torch.distributed.run"],
    ("python", "-m", "torch.distributed.run"): ["-m", "torch.distributed.run"],
    ("accelerate", "launch"): ["-m", "accelerate.commands.launch"],
}
SETUP = {"pip", "export", "cd", "git", "apt-get", "source", "uptime", "echo", "mkdir", "ls", "cat"}
HELP_TIMEOUT_S = 600   # a --help that takes longer hangs


def docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]


@dataclass
class Command:
    doc: str            # README.md, docs/plan.md
    line: int           # where the command starts in its doc
    text: str           # as the reader copies it (one line, continuations joined)
    words: list[str] = field(default_factory=list)
    comment: str = ""   # its comments: `# needs a GPU` says why no test runs it


def commands(path: Path) -> list[Command]:
    """The commands of every shell block of one Markdown file."""
    out, block, start, lang = [], None, 0, None
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        fence = re.match(r"^\s*```+\s*([\w-]*)", line)
        if fence and block is None:
            block, start, lang = [], number, fence.group(1).lower()
            continue
        if fence:
            if lang in FENCES:
                out += _block_commands(path, block, start, lang == "console")
            block = None
            continue
        if block is not None:
            block.append(line)
    return out


def _block_commands(path: Path, lines: list[str], fence_line: int, console: bool) -> list[Command]:
    found, pending, first, comment = [], "", 0, ""
    for offset, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if console:   # a console block: `$ command`, the rest is output
            if not pending and not line.lstrip().startswith("$ "):
                continue
            line = line.lstrip()[2:] if not pending else line
        text, note = _split_comment(line)
        text = text.rstrip()
        if not pending:
            first, comment = fence_line + offset, ""
        comment += note
        if text.endswith("\\"):
            pending += text[:-1].strip() + " "
            continue
        text = (pending + text.strip()).strip()
        pending = ""
        for part in _chain(text):
            found.append(Command(_name(path), first, " ".join(part) if part != _words(text) else text,
                                 part, comment.strip()))
    return found


def _name(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _split_comment(line: str) -> tuple[str, str]:
    """The line and its shell comment (from a `#` at the start of a word, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1:].strip() + " "
    return line, ""


def _unbracket(word: str) -> str:
    """`[--flag` and `VALUE]` of an optional part as written; `.[test]` (a pip extra) stays."""
    word = word[1:] if word.startswith("[") else word
    return word[:-1] if word.endswith("]") and "[" not in word else word


def _chain(text: str) -> list[list[str]]:
    """The commands of a `a && b; c | d` line, each as its words."""
    parts, current = [], []
    for word in _words(text, operators=True):
        if word in ("&&", "||", ";", "|", "&"):
            parts.append(current)
            current = []
        else:
            current.append(word)
    return [p for p in [*parts, current] if p]


def _words(text: str, operators: bool = False) -> list[str]:
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars="&;|" if operators else False)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:   # an unbalanced quote in a placeholder: plain split
        words = text.split()
    # optional parts `[--flag X]` are read as written; `...`, `<placeholder>` are the reader's to fill
    words = [_unbracket(w) for w in words]
    return [w for w in words if w and "..." not in w]


# ---- reading a command ------------------------------------------------------------------------------
@dataclass
class Program:
    """One program of a command and the options given to it."""
    kind: str                  # "script", "module", "console", "launcher", "setup", "user script", "ci"
    name: str                  # examples/x.py, torch_neuronx.plan, torchrun, pip
    help_argv: list[str]       # how to ask it for --help (python's arguments), [] when it has none here
    flags: list[str]           # the --flags the command gives it
    words: list[str]           # all its arguments


@dataclass
class Reading:
    command: Command
    env: list[str]
    programs: list[Program]


def read(command: Command) -> Reading:
    words = list(command.words)
    env = []
    while words and ENV_ASSIGN.match(words[0]):
        env.append(ENV_ASSIGN.match(words.pop(0)).group(1))
    programs: list[Program] = []
    _read_into(words, programs)
    return Reading(command, env, programs)


def _read_into(words: list[str], programs: list[Program]) -> None:
    if not words:
        return
    for prefix, module_argv in LAUNCHERS.items():
        if tuple(words[:len(prefix)]) == prefix:
            rest = words[len(prefix):]
            at = next((i for i, w in enumerate(rest) if w.endswith(".py")), len(rest))
            own = rest[:at]
            programs.append(Program("launcher", " ".join(prefix), [*module_argv, "--help"], _flags(own), own))
            return _read_into(["python", *rest[at:]], programs) if at < len(rest) else None
    head = words[0]
    if head in ("python", "python3"):
        rest = words[1:]
        if rest[:1] == ["-c"]:
            programs.append(Program("snippet", "python -c", [], [], rest))
            return None
        if rest[:1] == ["-m"] and len(rest) > 1:
            module, args = rest[1], rest[2:]
            return _program(programs, "module", module, ["-m", module], args)
        if rest and rest[0].endswith(".py"):
            return _program(programs, "script", rest[0], [rest[0]], rest[1:])
        programs.append(Program("python", "python", [], _flags(rest), rest))
        return None
    scripts = console_scripts()
    if head in scripts:
        module, function = scripts[head].split(":")
        code = f"import sys; sys.argv[0] = {head!r}; from {module} import {function}; sys.exit({function}())"
        return _program(programs, "console", head, ["-c", code], words[1:])
    if head.startswith((".ci/", "./.ci/")):
        programs.append(Program("ci", head.removeprefix("./"), [], _flags(words[1:]), words[1:]))
        return None
    if head.endswith(".py"):
        return _program(programs, "script", head, [head], words[1:])
    programs.append(Program("setup" if head in SETUP else "other", head, [], _flags(words[1:]), words[1:]))
    return None


def _program(programs, kind, name, argv, args):
    """`name` run with `args`: with `-- TARGET ...` (the planner's form) the target is a program of its own."""
    own, target = (args[:args.index("--")], args[args.index("--") + 1:]) if "--" in args else (args, [])
    leading = []   # subcommands (`plan run`): they choose which options exist
    for w in own:
        if w.startswith("-"):
            break
        leading.append(w)
    # TorchTitan's --module/--config choose the config whose fields are the options
    selectors = [w for i, w in enumerate(own) if kind == "script" and _selects(own, i)]
    if kind in ("script",) and not (REPO / name).exists() and "/" not in name:
        kind = "user script"
    programs.append(Program(kind, name, [*argv, *leading, *selectors, "--help"], _flags(own), own))
    if target:
        _read_into(["python", *target] if target[0].endswith(".py") else target, programs)


def _selects(words, i):
    return words[i] in ("--module", "--config") or (i > 0 and words[i - 1] in ("--module", "--config"))


def _flags(words: list[str]) -> list[str]:
    return [m.group(1).split("=")[0] for w in words for m in [FLAG.match(w)] if m]


@functools.cache
def console_scripts() -> dict[str, str]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("scripts", {})


@functools.cache
def extras() -> frozenset[str]:
    return frozenset(tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("optional-dependencies", {}))


# ---- checking a command -----------------------------------------------------------------------------
@functools.cache
def help_text(argv: tuple[str, ...]) -> tuple[int, str]:
    """The exit status and output of `python ARGV` (which ends in --help), run from the repository."""
    env = dict(os.environ, COLUMNS="250", NO_COLOR="1", TERM="dumb", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, *argv], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=HELP_TIMEOUT_S)
    return p.returncode, p.stdout + p.stderr


_MISSING: dict[str, str] = {}   # program -> the package its --help could not import


def _program_key(argv) -> str:
    return argv[1] if argv[0] == "-m" else argv[0]


def prefetch_help(argvs) -> None:
    """Every `--help` of `argvs`, two at a time (each is a fresh interpreter that imports torch): first one
    per program, then the others of the programs whose first could import what it needs."""
    from concurrent.futures import ThreadPoolExecutor

    by_program: dict[str, list[tuple[str, ...]]] = {}
    for argv in sorted(set(map(tuple, argvs))):
        by_program.setdefault(_program_key(argv), []).append(argv)
    with ThreadPoolExecutor(max_workers=2) as pool:
        firsts = dict(zip(by_program, pool.map(help_text, [argvs[0] for argvs in by_program.values()])))
        _MISSING.update({program: dep for program, (_, out) in firsts.items()
                         for dep in [missing_dependency(out)] if dep})
        list(pool.map(help_text, [argv for program, argvs in by_program.items() if program not in _MISSING
                                  for argv in argvs[1:]]))


def missing_dependency(output: str) -> str | None:
    """The package a --help could not import, when it is not one of this project's own."""
    m = re.search(r"No module named '([\w.]+)'", output)
    if m and not m.group(1).startswith(("torch_neuronx", "nki", "neuron_hardware", "examples", "benchmarks")):
        return m.group(1).split(".")[0]
    return None


@functools.cache
def env_names_read() -> frozenset[str]:
    names = set()
    for path in (REPO / "torch_neuronx").rglob("*.py"):
        names |= set(re.findall(r"TORCH_NEURONX_[A-Z0-9_]+", path.read_text(errors="replace")))
    for path in (REPO / "csrc").rglob("*"):
        if path.is_file():
            names |= set(re.findall(r"TORCH_NEURONX_[A-Z0-9_]+", path.read_text(errors="replace")))
    return frozenset(names)


def problems(reading: Reading) -> list[str]:
    """What in the command does not exist (empty when it all does); flags of a program whose --help needs
    a package that is not installed are not checked here (`unchecked`)."""
    found = []
    for name in reading.env:
        if name.startswith("TORCH_NEURONX_") and name not in env_names_read():
            found.append(f"{name}: no such environment variable in torch_neuronx/")
    for p in reading.programs:
        if p.kind == "script" and not (REPO / p.name).is_file():
            found.append(f"{p.name}: no such script")
            continue
        if p.kind == "module" and p.name.split(".")[0] in ("torch_neuronx", "nki", "neuron_hardware", "benchmarks",
                                                           "examples", "tests"):
            if importlib.util.find_spec(p.name.split(".")[0]) is None or not _module_exists(p.name):
                found.append(f"python -m {p.name}: no such module")
                continue
        if p.kind == "ci" and not (REPO / p.name).is_file():
            found.append(f"{p.name}: no such script")
        if p.name == "pip" and p.words[:1] == ["install"]:
            for spec in p.words[1:]:
                m = re.search(r"\[([\w,-]+)\]", spec)
                if m and (spec.startswith((".", "-e")) or "torch-neuronx" in spec):
                    found += [f"pip extra [{e}]: not in pyproject.toml" for e in m.group(1).split(",") if e not in extras()]
        if p.help_argv and p.flags:
            if p.kind == "user script" or _lacks_dependency(p):
                continue
            code, out = help_text(tuple(p.help_argv))
            if missing_dependency(out):
                continue
            if code != 0 or not FLAG.search(out):
                found.append(f"{p.name} --help failed (exit {code}): {out.strip()[-400:]}")
                continue
            known = {m.group(1) for m in FLAG.finditer(out)}
            found += [f"{p.name}: no option {flag}" for flag in p.flags if flag not in known]
    return found


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _lacks_dependency(p: Program) -> str | None:
    """The package this program's --help could not import (once known for a program, not asked again)."""
    return _MISSING.get(_program_key(p.help_argv)) or missing_dependency(help_text(tuple(p.help_argv))[1])


def unchecked(reading: Reading) -> list[str]:
    """Packages whose absence kept a program's --flags from being checked here."""
    return [dep for p in reading.programs if p.help_argv and p.flags and p.kind != "user script"
            for dep in [_lacks_dependency(p)] if dep]


# ---- how each is run --------------------------------------------------------------------------------
@functools.cache
def _runner_texts() -> tuple[tuple[str, str], ...]:
    files = [*sorted((REPO / "tests").rglob("*.py")), *sorted((REPO / ".ci").glob("*"))]
    return tuple((str(f.relative_to(REPO)), f.read_text(errors="replace")) for f in files
                 if f.is_file() and f.name != "docs_commands.py" and f.name != "test_docs_commands.py")


@functools.cache
def runners(name: str) -> list[str]:
    """The test files and CI scripts that start this program (name its script, or its module as `-m`)."""
    if name.endswith(".py"):   # a script: its path or file name
        pattern = "|".join(rf"(?<![\w/.-]){re.escape(k)}(?![\w-])" for k in {name, Path(name).name})
    else:                      # a module: as `-m NAME` or a quoted NAME in an argument list (not an import)
        m = re.escape(name)
        pattern = rf"-m\s+{m}(?![\w.])|[\"']-m[\"'],\s*[\"']{m}[\"']|[\"']{m}[\"']"
    return [path for path, text in _runner_texts() if re.search(pattern, text)]


NEEDS = re.compile(r"\bneeds (a |an |the )?[^,;.]*")   # `# needs a GPU`, `# needs the Hugging Face Hub`


def how_checked(reading: Reading, comment: str = "") -> str:
    needs = NEEDS.search(comment)
    if needs and not covered(reading):
        return f"not run by CI: {needs.group(0).strip()} (said in the doc)"
    parts = []
    for p in reading.programs:
        if p.kind in ("setup", "other") and p.name != "pip":
            continue
        if p.kind == "user script":
            parts.append(f"`{p.name}`: the user's own script")
            continue
        if p.kind == "snippet":
            parts.append("run by tests/test_docs_commands.py")
            continue
        if p.name == "pip":
            parts.append("run by .ci/run or .ci/torchtitan-smoke (the install)")
            continue
        if p.kind == "launcher":
            continue
        if _benchmark(p):
            parts.append(f"`{p.name}`: a benchmark, run on demand on a quiet machine (benchmarks/README.md)")
            continue
        found = runners(p.name)
        parts.append(f"`{p.name}` run by " + ", ".join(found[:3]) + (f" (+{len(found) - 3})" if len(found) > 3 else "")
                     if found else f"`{p.name}`: NOT RUN BY ANY TEST")
    return "; ".join(parts) or "shell setup"


def _benchmark(program: Program) -> bool:
    """A benchmark runs on demand: its timings need a quiet machine, and it never asserts (benchmarks/README.md)."""
    return program.kind == "script" and program.name.startswith("benchmarks/")


def covered(reading: Reading) -> bool:
    return not any(p.kind in ("script", "module", "console", "ci") and not _benchmark(p) and not runners(p.name)
                   for p in reading.programs)


def all_commands() -> list[Command]:
    return [c for d in docs() for c in commands(d)]


def table(cmds: list[Command] | None = None) -> str:
    rows = ["# Documented commands and how each is checked", "",
            "Generated by `python -m tests.docs_commands --write` from the shell blocks of README.md and docs/*.md;",
            "`tests/test_docs_commands.py` fails when it is out of date, when a command names a script, module,",
            "option or TORCH_NEURONX_* variable that does not exist, and when no test runs a command's program",
            "(benchmarks run on demand: benchmarks/README.md).",
            "Every command's script or module and `--flags` are checked against the program's own `--help`",
            "(TorchTitan's where torchtitan is installed: `.ci/torchtitan-smoke` runs this test too).", "",
            "| doc | command | how it is checked |", "|---|---|---|"]
    for c in cmds if cmds is not None else all_commands():
        text = (c.text if len(c.text) <= 110 else c.text[:107] + "...").replace("|", "\\|")
        rows.append(f"| {c.doc} | `{text}` | {how_checked(read(c), c.comment)} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        TABLE.write_text(table())
        print(f"wrote {TABLE.relative_to(REPO)}")
    else:
        sys.stdout.write(table())
