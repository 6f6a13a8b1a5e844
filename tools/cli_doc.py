"""Write docs/cli.md from each ds2-* command's `--help`, so the reference can't drift from the flags.

    .venv/bin/python tools/cli_doc.py            # rewrite docs/cli.md
    .venv/bin/python tools/cli_doc.py --check    # exit 1 if docs/cli.md differs from what it would write

The commands are setup.cfg's console scripts, and ds2-prepare's own commands (`ds2-prepare tiny --help`: each
defines its own flags), run from the bin folder of the Python running this script (the project's venv), eight at
a time: three of them load TensorFlow to define their flags, which takes seconds each.
"""

from __future__ import annotations

import argparse
import configparser
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "cli.md"
HEADER = """# Command reference

Every `ds2-*` command's `--help`, and every `ds2-prepare COMMAND --help` (each of its commands takes its own
flags), as `tools/cli_doc.py` writes it (`tests/test_cli.py` fails when this page is stale). The task pages show
the commands at work: [data.md](data.md), [training.md](training.md), [decoding.md](decoding.md),
[serving.md](serving.md), [streaming.md](streaming.md). Flags can also come from a flagfile (`--flagfile=FILE`, one
flag a line; a later flag overrides an earlier one), and `--helpfull` adds absl's own flags.
"""


def commands() -> list[str]:
    """setup.cfg's console scripts, in its order."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    names = [line.split("=")[0].strip() for line in cfg["options.entry_points"]["console_scripts"].splitlines()
             if line.strip()]
    return names


def prepare_commands() -> list[str]:
    """ds2-prepare's commands (`ds2-prepare tiny`, ...), each with a --help of its own."""
    from deepspeech2_cli.ds2_prepare import COMMANDS  # defines no flags: a command defines its own when it runs

    return [f"ds2-prepare {name}" for name, _, _ in COMMANDS]


def help_text(command: str) -> str:
    """`command --help`'s output, with TensorFlow hidden from the GPU so every machine prints the same."""
    env = {k: v for k, v in os.environ.items() if k not in ("DS2_TF_LOGS", "COLUMNS")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    script, *sub = command.split()
    out = subprocess.run([str(Path(sys.executable).parent / script), *sub, "--help"], capture_output=True,
                         text=True, env=env, timeout=300, cwd=REPO)
    if out.returncode != 0:
        raise RuntimeError(f"`{command} --help` failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout.rstrip() + "\n"


def render() -> str:
    """docs/cli.md's text: a section per command, and in ds2-prepare's, a subsection per ds2-prepare command."""
    names, subs = commands(), prepare_commands()
    with ThreadPoolExecutor(max_workers=8) as pool:
        helps = dict(zip(names + subs, pool.map(help_text, names + subs)))
    parts = [HEADER, "\n" + " · ".join(f"[{n}](#{n})" for n in names) + "\n"]
    for name in names:
        parts.append(f"\n## {name}\n\n```text\n{helps[name]}```\n")
        for sub in subs if name == "ds2-prepare" else ():
            parts.append(f"\n### {sub}\n\n```text\n{helps[sub]}```\n")
    return "".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md is stale, writing nothing")
    args = parser.parse_args()
    text = render()
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(REPO)} is stale: run .venv/bin/python tools/cli_doc.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
