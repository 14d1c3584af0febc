"""Fine-tuning tasks: the shared runner (`fine_tuning`) and one module per task (`classification`,
`question_answering`, `multiple_choice`, `tagging`, ...), each the library side of a `run_*.py`
script."""
