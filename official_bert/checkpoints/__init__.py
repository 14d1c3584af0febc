"""BERT weights in and out: the model folder, original TF1 checkpoints, Hugging Face files.

`load_encoder(path)` is the one-line way in: it accepts a model folder of any kind, an original
TF1 `bert_model.ckpt` (prefix or folder) or a Hugging Face folder. `save_model_dir` /
`load_model_dir` write and read the one model-folder format (`checkpoints/model_dir.py`).
`convert_checkpoint.py` is the command-line front end of `convert`.
"""

from official_bert.checkpoints.converter import (
                                                 LocatedCheckpoint,
                                                 check_init_checkpoint,
                                                 convert,
                                                 export_pretrained_dir,
                                                 load_encoder,
                                                 load_model,
                                                 load_pretrainer,
                                                 read_config,
                                                 restore_encoder_weights,
                                                 restore_pretrainer_weights,
                                                 restore_task_weights,
                                                 write_dir,
)
from official_bert.checkpoints.huggingface import (
                                                 hf_to_original,
                                                 load_hf_checkpoint,
                                                 read_hf_config,
                                                 read_hf_weights,
)
from official_bert.checkpoints.model_dir import (
                                                 CONFIG_NAME,
                                                 MANIFEST_NAME,
                                                 VOCAB_NAME,
                                                 WEIGHTS_NAME,
                                                 ModelInfo,
                                                 is_model_dir,
                                                 load_model_dir,
                                                 model_info,
                                                 read_model_info,
                                                 save_model_dir,
)
from official_bert.checkpoints.tf1 import (
                                                 CHECKPOINT_NAME,
                                                 check_compatible,
                                                 get_original_weights,
                                                 head_names,
                                                 list_tf1_variables,
                                                 load_tf1_checkpoint,
                                                 original_variable_shapes,
                                                 read_tf1_checkpoint,
                                                 save_tf1_checkpoint,
                                                 set_head_weights,
                                                 set_original_weights,
)
