"""absl's app.run for the ds2-* commands, with a --help that shows the command's own docstring and flags.

absl's --help prints `sys.modules['__main__'].__doc__` and the flags of the module named by sys.argv[0]. For
an installed console script both are the generated wrapper in .venv/bin, so --help showed neither our text
nor one of our flags, and it exited 1. Here --help (also -? and --helpshort) prints the docstring of the
module that defines `main`, that module's flags with their help text and defaults, and exits 0, whether the
command runs as `ds2-x` or as `python bin/ds2_x.py`; --helpfull does the same with every flag of every module.
The console scripts reach `run` through their launcher in deepspeech2_cli (bin/__init__.py), which has quieted
TensorFlow's start-up first (`_quiet.quiet_tensorflow`).
A flag that doesn't parse gives `ds2-x: error: ...` and exit status 1, and so does an OSError the command
doesn't handle itself (a full disk, a missing permission, a file where a folder should be): one line naming the
path, `ds2-x: error: cannot write PATH: No space left on device`, instead of a traceback.

When stderr is not a terminal (a log file, `make demo > log`), progress bars refresh every 30 s
(DS2_PROGRESS=log, see deepspeech2.progress) and each refresh is its own line, instead of one
carriage-return-separated line of many kilobytes. DS2_PROGRESS=0 hides every bar, on a terminal or in a log.
"""

import errno
import os
import sys
import textwrap

from absl import app, flags
from absl import logging as absl_logging

FLAGS = flags.FLAGS

ENVIRONMENT_HELP = """\
common flags:
  --flagfile: Read flags from a file, one per line (flagfiles may include each other).
  --helpfull: Every flag of every module, absl's included.

environment:
  DS2_TF_LOGS=1: Show TensorFlow's start-up and C++ log lines (oneDNN, CUDA, CPU features), hidden by default.
  DS2_PROGRESS=0: No progress bars (log: a refresh every 30 s, what a log file gets anyway).
"""


def command_name(module_name: str) -> str:
    """`ds2-build-vocab` for deepspeech2_cli.ds2_build_vocab, for bin/ds2_build_vocab.py and for the wrapper."""
    if module_name == "__main__":
        module_name = os.path.basename(sys.argv[0]).removesuffix(".py")
    return module_name.rsplit(".", 1)[-1].replace("_", "-")


def _flags_key(module_name: str) -> str:
    # absl files the flags of the script being run under sys.argv[0], those of an imported module under its name.
    return sys.argv[0] if module_name == "__main__" else module_name


def help_text(module, full: bool = False, doc: str | None = None) -> str:
    """The docstring of `module` (or `doc`), then its flags (help text, default, type), then the common flags.

    With `full`, every flag of every module, grouped by module (absl's --helpfull list).
    """
    name = module.__name__
    doc = textwrap.dedent(doc or module.__doc__ or f"{command_name(name)} [flags]\n").strip("\n")
    if full:
        every = FLAGS.get_help().strip("\n")
        return f"{doc}\n\nflags:\n{every}\n\n{ENVIRONMENT_HELP}"
    key = _flags_key(name)
    own = FLAGS.module_help(key).strip("\n")
    # module_help starts with a line naming the module ("deepspeech2_cli.ds2_x:"); we say "flags:" instead.
    own = own.split("\n", 1)[1] if own.startswith(f"{key}:") and "\n" in own else own
    text = doc + "\n"
    if own:
        text += f"\nflags:\n{own}\n"
    return text + "\n" + ENVIRONMENT_HELP


def _print_help_and_exit(module, full: bool, doc: str | None) -> None:
    try:
        sys.stdout.write(help_text(module, full, doc))
        sys.stdout.flush()
    except BrokenPipeError:  # `ds2-x --help | head`
        sys.stdout = None  # nothing more to flush at exit
    sys.exit(0)


class _HelpFlag(app.HelpFlag):
    """--help / -? : prints help_text(module) to stdout and exits 0."""

    def __init__(self, module, doc, name="help", short_name="?"):
        self.NAME, self.SHORT_NAME = name, short_name
        super().__init__()
        self._module, self._doc = module, doc

    def parse(self, arg):
        if self._parse(arg):
            _print_help_and_exit(self._module, False, self._doc)


class _HelpfullFlag(app.HelpfullFlag):
    """--helpfull: the docstring and every flag of every module; exits 0."""

    def __init__(self, module, doc):
        super().__init__()
        self._module, self._doc = module, doc

    def parse(self, arg):
        if self._parse(arg):
            _print_help_and_exit(self._module, True, self._doc)


def _install_help(module, doc: str | None) -> None:
    app.define_help_flags()  # absl's help flags (idempotent); ours replace --help, -?, --helpshort, --helpfull.
    for name in ("help", "?", "helpshort", "helpfull"):
        if name in FLAGS:
            delattr(FLAGS, name)
    for flag in (_HelpFlag(module, doc), _HelpFlag(module, doc, "helpshort", None), _HelpfullFlag(module, doc)):
        flags.DEFINE_flag(flag, module_name="absl.app")


def _parse_flags(command: str):
    def parse(argv):
        try:
            return FLAGS(argv)
        except flags.Error as e:
            lines = str(e).strip().splitlines() or [type(e).__name__]
            if len(lines) == 1:
                sys.stderr.write(f"{command}: error: {lines[0]} (see {command} --help)\n")
            else:
                sys.stderr.write(f"{command}: error: bad flags (see {command} --help):\n")
                sys.stderr.writelines(f"  {line.strip()}\n" for line in lines)
            sys.exit(1)

    return parse


# What a write can fail with that a read can't: these say "cannot write", the others "cannot access".
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


def os_error_line(command: str, e: OSError) -> str:
    """`ds2-x: error: cannot write PATH: No space left on device`: one line for an OSError, naming its path (the
    destination of a rename)."""
    path = e.filename2 if e.filename2 is not None else e.filename
    why = e.strerror or str(e) or type(e).__name__
    if path is None:
        return f"{command}: error: {why}"
    verb = "cannot write" if e.errno in _WRITE_ERRNOS else "cannot access"
    where = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)  # str, or a descriptor
    return f"{command}: error: {verb} {where}: {why}"


class LogLines:
    """A text stream for log files: each carriage-return refresh (tqdm's) becomes its own line, and the blank
    refreshes that clear a finished bar are dropped."""

    def __init__(self, stream):
        self._stream = stream
        self._line_start = True

    def write(self, text: str) -> int:
        pieces = text.split("\r")
        out = [pieces[0]] if pieces[0] else []
        line_start = self._line_start if not pieces[0] else pieces[0].endswith("\n")
        for piece in pieces[1:]:
            if not piece.strip():  # a bar cleared: what follows starts a line
                if not line_start:
                    out.append("\n")
                    line_start = True
                continue
            out.append(piece if line_start else "\n" + piece)
            line_start = piece.endswith("\n")
        self._line_start = line_start
        return self._stream.write("".join(out)) if out else 0

    def __getattr__(self, name):  # flush, fileno, isatty, encoding...
        return getattr(self._stream, name)


def _progress_for_logs() -> None:
    """Bars on stderr that isn't a terminal: DS2_PROGRESS=log (a refresh every 30 s, for this command and the
    ones it starts), one line each (`LogLines`). DS2_PROGRESS=0 stays: no bars."""
    if sys.stderr is None or sys.stderr.isatty():
        return
    from deepspeech2.progress import PROGRESS_ENV, progress_enabled

    if progress_enabled():
        os.environ[PROGRESS_ENV] = "log"
    sys.stderr = LogLines(sys.stderr)


def run(main, doc: str | None = None, command: str | None = None) -> None:
    """app.run(main) with the --help above. `main` is the command's main(argv), defined in its module.

    `doc` replaces the module's docstring in --help, and `command` its name in error lines (a subcommand's:
    `ds2-prepare tiny`). Library log lines below WARNING stay hidden (absl would print every INFO line);
    --verbosity 0 shows them.
    """
    module = sys.modules[main.__module__]
    _install_help(module, doc)
    command = command or command_name(module.__name__)

    def quiet_main(argv):
        if not FLAGS["verbosity"].present:
            absl_logging.set_verbosity(absl_logging.WARNING)
        _progress_for_logs()
        try:
            return main(argv)
        except BrokenPipeError:  # `ds2-x ... | head`: the reader is gone, nothing to say to it
            sys.stdout = None
            sys.exit(1)
        except OSError as e:
            sys.stderr.write(os_error_line(command, e) + "\n")
            sys.exit(1)

    app.run(quiet_main, flags_parser=_parse_flags(command))
