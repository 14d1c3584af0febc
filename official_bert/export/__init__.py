"""Serving: the fine-tuned model folder and SavedModels for TF Serving.

A fine-tuning script ends with `save_task_model(model, output_dir, task=..., ...)`;
`load_task_model(output_dir)` rebuilds the model, and `export_model_dir(output_dir, export_dir)`
(the library side of `export_saved_model.py`) writes the SavedModel for its task. Each `export_*`
function also takes an in-memory model directly. The signatures of every kind are listed in
`official_bert/export/saved_model.py`.
"""

from official_bert.export.model_dir import (
  TASK_FILE,
  TASKS,
  WEIGHTS_FILE,
  TaskInfo,
  load_task_model,
  save_task_model,
)
from official_bert.export.saved_model import (
  export_classifier,
  export_encoder,
  export_model_dir,
  export_multiple_choice,
  export_span_labeler,
  export_task_model,
  export_token_classifier,
)

__all__ = [
    "TASKS", "TASK_FILE", "WEIGHTS_FILE", "TaskInfo", "export_classifier", "export_encoder",
    "export_model_dir", "export_multiple_choice", "export_span_labeler", "export_task_model",
    "export_token_classifier", "load_task_model", "save_task_model",
]
