"""BERT weights in and out: original TF1 checkpoints, Hugging Face files, converted folders.

`load_encoder(path)` is the one-line way in: it accepts a converted folder, an original TF1
`bert_model.ckpt` (prefix or folder) or a Hugging Face folder. `convert_checkpoint.py` is the
command-line front end of `convert`.
"""

from official_bert.checkpoints.converter import (CONFIG_NAME, ENCODER_WEIGHTS, PRETRAINER_WEIGHTS,
                                                 VOCAB_NAME, convert, export_pretrained_dir,
                                                 load_encoder, load_pretrainer, read_config,
                                                 restore_encoder_weights,
                                                 restore_pretrainer_weights, write_dir)
from official_bert.checkpoints.huggingface import (hf_to_original, load_hf_checkpoint,
                                                   read_hf_config, read_hf_weights)
from official_bert.checkpoints.tf1 import (CHECKPOINT_NAME, check_compatible,
                                           get_original_weights, list_tf1_variables,
                                           load_tf1_checkpoint, original_variable_shapes,
                                           read_tf1_checkpoint, save_tf1_checkpoint,
                                           set_original_weights)
