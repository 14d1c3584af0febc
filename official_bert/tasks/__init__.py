"""Tasks: the `Task` protocol (`base`), the run's one config tree (`experiment`), the one driver
(`driver`, with its `runner` and the output folder's lock and fingerprint, `output_folder`), and one
module per task (`classification`, `question_answering`, `multiple_choice`, `tagging`,
`pretraining`, `feature_extraction`), each the library side of a script."""
