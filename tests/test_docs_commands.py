"""Every command a user can copy from README.md and docs/*.md names a script, module, option and variable
that exist, a test runs its program (or the doc says what it needs that CI lacks), and
tests/documented-commands.md lists them all with how each is checked (tests/docs_commands.py reads them)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests import docs_commands as dc


@pytest.fixture(scope="module")
def readings():
    readings = [dc.read(c) for c in dc.all_commands()]
    dc.prefetch_help(p.help_argv for r in readings for p in r.programs if p.help_argv and p.flags)
    return readings


def _where(reading):
    return f"{reading.command.doc}:{reading.command.line}: {reading.command.text}"


def test_every_documented_command_names_a_script_module_option_and_variable_that_exist(readings):
    assert readings, "no shell block found in README.md or docs/"
    stale = [f"{_where(r)}\n    " + "\n    ".join(found) for r in readings for found in [dc.problems(r)] if found]
    unchecked = sorted({dep for r in readings for dep in dc.unchecked(r)})
    print(f"{len(readings)} commands; options not checked here for want of: {unchecked or 'nothing'}")  # -rP
    assert not stale, "documented commands that no longer work as written:\n" + "\n".join(stale)


@pytest.mark.torchtitan
@pytest.mark.torchtitan_ci
def test_documented_torchtitan_commands_name_options_torchtitan_has():
    """With TorchTitan installed (.ci/torchtitan-smoke): the commands that launch it, their options checked
    against TorchTitan's own --help. The main suite checks every other command and option without it."""
    readings = [dc.read(c) for c in dc.all_commands() if "torchtitan" in c.text]
    assert readings, "no documented command launches TorchTitan"
    dc.prefetch_help(p.help_argv for r in readings for p in r.programs if p.help_argv and p.flags)
    unchecked = sorted({dep for r in readings for dep in dc.unchecked(r)})
    assert not unchecked, f"options left unchecked for want of {unchecked}: install them as .ci/torchtitan-install does"
    stale = [f"{_where(r)}\n    " + "\n    ".join(found) for r in readings for found in [dc.problems(r)] if found]
    print(f"{len(readings)} TorchTitan commands checked against TorchTitan's --help")  # -rP
    assert not stale, "documented TorchTitan commands that no longer work as written:\n" + "\n".join(stale)


def test_every_documented_program_is_run_by_a_test_or_the_doc_says_what_it_needs(readings):
    orphans = [_where(r) for r in readings if not dc.covered(r) and not dc.NEEDS.search(r.command.comment)]
    assert not orphans, ("commands whose program no test or CI script runs; run it in a test, or end the "
                         "command with a comment `# needs ...` saying what CI lacks:\n" + "\n".join(orphans))


def test_the_python_snippets_run(readings):
    snippets = [r for r in readings if any(p.kind == "snippet" for p in r.programs)]
    for r in snippets:
        (program,) = [p for p in r.programs if p.kind == "snippet"]
        p = subprocess.run([sys.executable, *program.words], cwd=dc.REPO, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, f"{_where(r)}\n{p.stderr[-2000:]}"


def test_the_table_of_documented_commands_is_current(readings):
    assert dc.TABLE.read_text() == dc.table([r.command for r in readings]), (
        f"{dc.TABLE.relative_to(dc.REPO)} is out of date: run `python -m tests.docs_commands --write`")


def test_a_stale_script_module_option_variable_or_extra_is_caught(tmp_path):
    doc = tmp_path / "stale.md"
    # the planted variable's name is put together so that the variable table's own test does not read it
    # as a variable the code uses
    fake = "TORCH_NEURONX_" + "NO_SUCH_SETTING"
    doc.write_text(textwrap.dedent("""\
        ```bash
        python -m torch_neuronx.plan run --instance trn2.48xlarge --no-such-option -- \\
            examples/quickstart.py                                   # a comment is not an option: --nope
        python examples/no_such_example.py --steps 2
        python -m torch_neuronx.no_such_module
        {fake}=1 python train.py
        pip install --no-build-isolation -e ".[test,no-such-extra]" && neuron-ls --no-such-flag
        ```

        ```console
        $ python -m torch_neuronx.plan run [--lnc 2] -- script.py args...
        some output --not-a-flag
        ```
        """).format(fake=fake))
    got = [dc.problems(dc.read(c)) for c in dc.commands(doc)]
    assert got == [
        ["torch_neuronx.plan: no option --no-such-option"],
        ["examples/no_such_example.py: no such script"],
        ["python -m torch_neuronx.no_such_module: no such module"],
        [f"{fake}: no such environment variable in torch_neuronx/"],
        ["pip extra [no-such-extra]: not in pyproject.toml"],
        ["neuron-ls: no option --no-such-flag"],
        [],   # optional parts in brackets read as written, the user's own script not looked for, output skipped
    ], got
