"""How every tool starts: absl parses the flags, stray arguments are refused, the work runs.

An error that is the user's to fix ends the tool with one line on stderr, `error: <message>`, and
exit status 2, without a traceback (`--verbose` shows it). Such an error is an
`official_bert.common.errors.UserError` (bad data, a bad config file, an output folder in use or
made for another run, ...), or a `ValueError` / `FileNotFoundError` raised by this package's own
checks (the raising line lies in `official_bert`). Any other exception is a bug, in this package or
below it, and keeps its traceback and absl's exit status.

Before the work, the paths of the flags a tool reads and writes are checked
(`official_bert.common.paths`): no output is, holds or lies inside an input, every output can be
written, every input's file system can be reached.
"""

import functools
import os
import re
import sys
import traceback

from absl import app, flags

from official_bert.common import paths
from official_bert.common.errors import UserError

FLAGS = flags.FLAGS
USER_ERROR_STATUS = 2
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def is_user_error(error):
  """Whether `error` reports a fault in the user's input rather than a bug.

  Args:
    error: the exception that ended the work.
  """
  if isinstance(error, UserError):
    return True
  if not isinstance(error, (ValueError, FileNotFoundError)) or error.__traceback__ is None:
    return False
  raising_file = traceback.extract_tb(error.__traceback__)[-1].filename
  return os.path.abspath(raising_file).startswith(_PACKAGE_DIR + os.sep)


def launch(work, required_flags=(), *, inputs=(), outputs=(), passes_on=None, output_files=None):
  """Runs a tool as an absl program, with `--verbose` beside the tool's own flags.

  Args:
    work: `work()` does the tool's one library call, reading the parsed flags.
    required_flags: names of the flags that must be given.
    inputs: names of the flags whose paths the tool reads.
    outputs: names of the flags whose paths it writes (`*_file`: a file, else a folder).
    passes_on: for a tool that hands the arguments absl does not know to another parser (Apache
      Beam's pipeline options): `passes_on(argv)` says whether this command line does; then they
      go to `work(rest)` instead of being refused.
    output_files: `output_files()`, called once the flags are parsed, names the `outputs` that
      are files whatever their names (`--export_dir` of a one-file export format).
  """
  flags.DEFINE_bool("verbose", False,
                    "Show the full traceback of an error in the input (bad data, flags or "
                    "folders) instead of its one-line message.")
  flags.mark_flags_as_required(list(required_flags))
  passing = passes_on is not None and passes_on(sys.argv)

  def main(argv):
    if len(argv) > 1 and not passing:
      _exit_with(f"unexpected argument(s) {' '.join(argv[1:])}: every setting is a flag, "
                 "--name=value (see --help)")
    try:
      paths.check_run_paths({name: FLAGS[name].value for name in inputs},
                            {name: FLAGS[name].value for name in outputs},
                            files=output_files() if output_files else ())
      if passing:
        work(argv[1:])
      else:
        work()
    except Exception as error:  # noqa: BLE001  (sorted below: the user's faults vs. bugs)
      if FLAGS.verbose or not is_user_error(error):
        raise
      _exit_with(str(error))

  app.run(main, flags_parser=functools.partial(_parse_flags, known_only=passing,
                                               tool_module=work.__module__))


def _parse_flags(argv, known_only=False, tool_module=None):
  """absl's flag parsing, with a bad flag (unknown, malformed, missing) as a user's error: absl
  itself would print the whole usage and exit with status 1. `known_only` leaves the flags absl
  does not know in the arguments it returns. `--help` prints the tool's own flags and exits 0."""
  if any(arg in _HELP_ARGUMENTS for arg in argv[1:]):
    _print_help(tool_module)
  try:
    return FLAGS(argv, known_only=known_only)
  except flags.Error as error:
    message = str(error)
    # absl words a bad boolean as a tuple: "('Non-boolean argument to boolean flag', 'flase')".
    message = re.sub(r"\('Non-boolean argument to boolean flag', '(.*)'\)",
                     r"'\1' is not a boolean: give true or false (or --name / --noname)",
                     message)
    _exit_with(f"{message} (see --help)")


_HELP_ARGUMENTS = ("--help", "-help", "-h", "-?", "--helpshort")


def _print_help(tool_module):
  """Prints the tool's documentation and the flags this package defines for it, then exits 0.

  absl's own `--help` lists the flags of the `__main__` module only, and the tools' flags are
  defined in `official_bert.cli`: it would list none.
  """
  module = sys.modules.get(tool_module)
  if module is not None and module.__doc__:
    print(module.__doc__.strip(), end="\n\n")
  modules = sorted(name for name in FLAGS.flags_by_module_dict()
                   if name.startswith("official_bert."))
  # The tool's own flags first, then those it shares with other tools (engine, fine-tuning, ...).
  modules.sort(key=lambda name: name != tool_module)
  for name in modules:
    print(FLAGS.module_help(name), end="\n\n")
  print("--helpfull lists every flag, TensorFlow's and absl's included.")
  sys.stdout.flush()
  sys.exit(0)


def _exit_with(message):
  """Ends the tool as a user's error: one line on stderr, exit status 2."""
  message = " ".join(message.split("\n"))
  sys.stderr.write(f"error: {message}\n")
  sys.stderr.flush()
  sys.exit(USER_ERROR_STATUS)
