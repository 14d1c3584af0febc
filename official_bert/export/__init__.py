"""Serving: SavedModels for TF Serving, from a model folder or an in-memory model.

A fine-tuning script ends with a model folder (`official_bert.checkpoints.save_model_dir`);
`export_model_dir(model_dir, export_dir)` (the library side of `export_saved_model.py`) writes the
SavedModel for its kind, in float32 or bfloat16 (`dtype`, see `precision.py`). Each `export_*`
function also takes an in-memory model directly. The signatures of every kind are listed in
`official_bert/export/saved_model.py`. `export_model_dir_as(model_dir, path, format=...)` writes
a LiteRT file with the tokenizer inside, an ONNX file or an OpenVINO folder instead (`formats.py`).
"""

from official_bert.export.formats import (
  FOLDER_FORMATS,
  FORMATS,
  PRECISIONS,
  ExportFileError,
  FormatError,
  export_model_dir_as,
  export_task_model_as,
)
from official_bert.export.precision import (
  SERVING_DTYPES,
  default_jit_compile,
  serving_dtype,
  trained_dtype,
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
    "FOLDER_FORMATS", "FORMATS", "PRECISIONS", "ExportFileError", "FormatError",
    "export_model_dir_as", "export_task_model_as",
    "SERVING_DTYPES", "default_jit_compile", "serving_dtype", "export_classifier",
    "export_encoder", "export_model_dir", "export_multiple_choice", "export_span_labeler",
    "export_task_model", "export_token_classifier", "trained_dtype",
]
