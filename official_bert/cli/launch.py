"""How every tool starts: absl parses the flags, stray arguments are refused, the work runs.

An error that is the user's to fix ends the tool with one line on stderr, `error: <message>`, and
exit status 2, without a traceback (`--verbose` shows it). Such an error is an
`official_bert.common.errors.UserError` (bad data, a bad config file, an output folder in use or
made for another run, ...), or a `ValueError` / `FileNotFoundError` raised by this package's own
checks (the raising line lies in `official_bert`). Any other exception is a bug, in this package or
below it, and keeps its traceback and absl's exit status.
"""

import os
import sys
import traceback

from absl import app, flags

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


def launch(work, required_flags=()):
  """Runs a tool as an absl program, with `--verbose` beside the tool's own flags.

  Args:
    work: `work()` does the tool's one library call, reading the parsed flags.
    required_flags: names of the flags that must be given.
  """
  flags.DEFINE_bool("verbose", False,
                    "Show the full traceback of an error in the input (bad data, flags or "
                    "folders) instead of its one-line message.")
  flags.mark_flags_as_required(list(required_flags))

  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    try:
      work()
    except Exception as error:  # noqa: BLE001  (sorted below: the user's faults vs. bugs)
      if FLAGS.verbose or not is_user_error(error):
        raise
      message = " ".join(str(error).split("\n"))
      sys.stderr.write(f"error: {message}\n")
      sys.stderr.flush()
      sys.exit(USER_ERROR_STATUS)

  app.run(main)
