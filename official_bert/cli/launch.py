"""How every tool starts: absl parses the flags, stray arguments are refused, the work runs."""

from absl import app, flags


def launch(work, required_flags=()):
  """Runs a tool as an absl program.

  Args:
    work: `work()` does the tool's one library call, reading the parsed flags.
    required_flags: names of the flags that must be given.
  """
  flags.mark_flags_as_required(list(required_flags))

  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"Unexpected arguments: {' '.join(argv[1:])}")
    work()

  app.run(main)
