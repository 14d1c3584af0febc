"""Tasks: the `Task` protocol and the tasks' registry by config class (`base`), the run's one
config tree (`experiment`), the one driver with its runner (`driver`; the output folder's lock
and fingerprint, `output_folder`), and one module per task (`classification`,
`question_answering`, `multiple_choice`, `tagging`, `pretraining`, `feature_extraction`), each
the library side of a script."""
