"""The base of the errors that are the user's to fix: input files, flags, folders, settings.

`UserError` subclasses `ValueError`, so code that catches `ValueError` keeps working. The command-
line tools print such an error as one line on stderr and exit with status 2 (see
`official_bert.cli.launch`); any other exception is a bug and keeps its traceback.
"""


class UserError(ValueError):
  """Something the user gave is wrong or missing; the message says what, where and what to do."""
