"""Tasks: the `Task` protocol (`base`), the one driver that runs every task (`driver`, with the
`runner` and the `output_folder` checks), and one module per task (`classification`,
`question_answering`, `multiple_choice`, `tagging`, `feature_extraction`), each the library side
of a `run_*.py` script."""
