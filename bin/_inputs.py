"""The inputs ds2-infer and ds2-client share: audio files as arguments, or the lines of --manifest (a random
--num_samples of them); and their exit status, 1 if any input failed."""

import sys

from absl import flags


def define_flags() -> None:
    """Define --manifest, --num_samples and --seed in the calling command."""
    flags.DEFINE_string("manifest", None, "Transcribe lines of this manifest instead of files.")
    flags.DEFINE_integer("num_samples", 0, "With --manifest: N random lines; 0: all.")
    flags.DEFINE_integer("seed", 0, "Seed of the --num_samples draw.")


def files(command: str, argv: list[str], values: flags.FlagValues) -> tuple[str, ...]:
    """The audio files of the command line; exits with `command: error: ...` unless it names files or --manifest
    (not both)."""
    paths = tuple(argv[1:])
    if bool(paths) == bool(values.manifest):
        sys.exit(f"{command}: error: give audio files, or --manifest (not both)")
    return paths


def exit_status(failed: int) -> None:
    """Exit 1 if any input failed (`failed` of them), else 0."""
    sys.exit(1 if failed else 0)
