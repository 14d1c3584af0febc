"""Tests for official_bert.checkpoints.huggingface: Hugging Face BERT weights in."""

import importlib.util
import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from official_bert import BertEncoder, BertPretrainer, checkpoints
from official_bert.checkpoints import huggingface, load_encoder, load_pretrainer
from official_bert.common.errors import UserError

from testing import minilm_model_dir, tiny_bert_config

CONFIG = tiny_bert_config(20, hidden_size=8, max_position_embeddings=16, hidden_act="gelu_erf")
# The Hugging Face `hidden_act` of each GELU: its `gelu` is the exact (erf) form.
HF_ACTIVATION = {"gelu_erf": "gelu", "gelu_tanh": "gelu_new"}


def hf_config(config, **extra_config):
  """The `config.json` values of `config`, with Hugging Face's activation name."""
  return {**config.to_dict(), "hidden_act": HF_ACTIVATION[config.hidden_act], **extra_config}


def hf_tensors(config, prefix="", heads=True, old_norm_names=False, seed=0):
  """Random tensors under Hugging Face `BertModel` / `BertForPreTraining` names and layouts."""
  rng = np.random.default_rng(seed)
  hidden, inner = config.hidden_size, config.intermediate_size
  weight, bias = ("gamma", "beta") if old_norm_names else ("weight", "bias")
  shapes = {
      "embeddings.word_embeddings.weight": (config.vocab_size, hidden),
      "embeddings.position_embeddings.weight": (config.max_position_embeddings, hidden),
      "embeddings.token_type_embeddings.weight": (config.type_vocab_size, hidden),
      f"embeddings.LayerNorm.{weight}": (hidden,),
      f"embeddings.LayerNorm.{bias}": (hidden,),
      "pooler.dense.weight": (hidden, hidden),
      "pooler.dense.bias": (hidden,),
  }
  for i in range(config.num_hidden_layers):
    for linear, (out, into) in {"attention.self.query": (hidden, hidden),
                                "attention.self.key": (hidden, hidden),
                                "attention.self.value": (hidden, hidden),
                                "attention.output.dense": (hidden, hidden),
                                "intermediate.dense": (inner, hidden),
                                "output.dense": (hidden, inner)}.items():
      shapes[f"encoder.layer.{i}.{linear}.weight"] = (out, into)
      shapes[f"encoder.layer.{i}.{linear}.bias"] = (out,)
    for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
      shapes[f"encoder.layer.{i}.{norm}.{weight}"] = (hidden,)
      shapes[f"encoder.layer.{i}.{norm}.{bias}"] = (hidden,)
  tensors = {prefix + name: rng.standard_normal(shape).astype(np.float32)
             for name, shape in shapes.items()}
  tensors[prefix + "embeddings.position_ids"] = np.arange(config.max_position_embeddings)[None]
  if heads:
    tensors.update({
        "cls.predictions.transform.dense.weight": rng.standard_normal((hidden, hidden)),
        "cls.predictions.transform.dense.bias": rng.standard_normal(hidden),
        "cls.predictions.transform.LayerNorm.weight": rng.standard_normal(hidden),
        "cls.predictions.transform.LayerNorm.bias": rng.standard_normal(hidden),
        "cls.predictions.bias": rng.standard_normal(config.vocab_size),
        "cls.seq_relationship.weight": rng.standard_normal((2, hidden)),
        "cls.seq_relationship.bias": rng.standard_normal(2),
    })
    tensors = {name: value.astype(np.float32) if value.dtype == np.float64 else value
               for name, value in tensors.items()}
    word_embeddings = tensors[prefix + "embeddings.word_embeddings.weight"]
    tensors["cls.predictions.decoder.weight"] = word_embeddings
    tensors["cls.predictions.decoder.bias"] = tensors["cls.predictions.bias"]
  return tensors


def write_hf_folder(folder, tensors, config=CONFIG, **extra_config):
  folder.mkdir(parents=True, exist_ok=True)
  save_file(tensors, str(folder / "model.safetensors"))
  values = hf_config(config, **{"model_type": "bert", "layer_norm_eps": 1e-12,
                                "architectures": ["BertForPreTraining"], **extra_config})
  (folder / "config.json").write_text(json.dumps(values))
  return folder


def test_pretraining_file_loads_with_transposes(tmp_path):
  tensors = hf_tensors(CONFIG, prefix="bert.")
  model = load_pretrainer(write_hf_folder(tmp_path / "hf", tensors))
  layer = model.encoder.transformer_layers[1]
  fused = np.concatenate([tensors[f"bert.encoder.layer.1.attention.self.{part}.weight"].T
                          for part in ("query", "key", "value")], axis=1)
  np.testing.assert_array_equal(layer.attention.qkv.kernel.numpy(), fused)
  np.testing.assert_array_equal(layer.intermediate.kernel.numpy(),
                                tensors["bert.encoder.layer.1.intermediate.dense.weight"].T)
  np.testing.assert_array_equal(layer.attention_layer_norm.gamma.numpy(),
                                tensors["bert.encoder.layer.1.attention.output.LayerNorm.weight"])
  np.testing.assert_array_equal(model.encoder.embeddings.position_embeddings.embeddings.numpy(),
                                tensors["bert.embeddings.position_embeddings.weight"])
  np.testing.assert_array_equal(model.encoder.pooler.kernel.numpy(),
                                tensors["bert.pooler.dense.weight"].T)
  np.testing.assert_array_equal(model.masked_lm.transform.kernel.numpy(),
                                tensors["cls.predictions.transform.dense.weight"].T)
  np.testing.assert_array_equal(model.masked_lm.output_bias.numpy(),
                                tensors["cls.predictions.bias"])
  np.testing.assert_array_equal(model.next_sentence.dense.kernel.numpy(),
                                tensors["cls.seq_relationship.weight"].T)


def test_older_gamma_beta_names_without_heads_load_as_encoder(tmp_path):
  tensors = hf_tensors(CONFIG, heads=False, old_norm_names=True)
  folder = write_hf_folder(tmp_path / "hf", tensors)
  encoder = load_encoder(folder / "model.safetensors")
  np.testing.assert_array_equal(encoder.embeddings.layer_norm.beta.numpy(),
                                tensors["embeddings.LayerNorm.beta"])
  np.testing.assert_array_equal(encoder.transformer_layers[0].output_layer_norm.gamma.numpy(),
                                tensors["encoder.layer.0.output.LayerNorm.gamma"])
  with pytest.raises(ValueError, match=r"missing \(7\): cls/"):
    load_pretrainer(folder)


def test_unknown_and_misshapen_tensors_are_reported(tmp_path):
  tensors = hf_tensors(CONFIG, heads=False)
  tensors["encoder.layer.0.attention.self.rotary.weight"] = np.zeros((8, 8), np.float32)
  tensors["encoder.layer.1.output.dense.weight"] = np.zeros((8, 15), np.float32)
  folder = write_hf_folder(tmp_path / "hf", tensors)
  with pytest.raises(ValueError) as error:
    load_pretrainer(folder)
  message = str(error.value)
  assert "model.safetensors" in message
  assert "unexpected (1): bert/encoder/layer_0/attention/self/rotary/kernel" in message
  assert "bert/encoder/layer_1/output/dense/kernel: checkpoint [15, 8] vs model [16, 8]" in message
  assert "position_ids" not in message


def test_untied_decoder_is_refused():
  tensors = hf_tensors(CONFIG)
  tensors["cls.predictions.decoder.weight"] = tensors["cls.predictions.decoder.weight"] + 1
  with pytest.raises(ValueError, match="differs from the word embeddings"):
    huggingface.hf_to_original(tensors)


def test_config_that_the_encoder_cannot_reproduce_is_refused(tmp_path):
  tensors = hf_tensors(CONFIG, heads=False)
  with pytest.raises(ValueError, match="layer_norm_eps is 1e-06"):
    load_encoder(write_hf_folder(tmp_path / "eps", tensors, layer_norm_eps=1e-6))
  with pytest.raises(ValueError, match="model_type is 'roberta'"):
    huggingface.read_hf_config(write_hf_folder(tmp_path / "roberta", tensors,
                                               model_type="roberta"))
  config = huggingface.read_hf_config(write_hf_folder(tmp_path / "ok", tensors))
  assert config == CONFIG


@pytest.mark.parametrize("hf_name, function", [
    ("gelu", "gelu_erf"), (None, "gelu_erf"), ("gelu_python", "gelu_erf"),
    ("gelu_new", "gelu_tanh"), ("gelu_pytorch_tanh", "gelu_tanh"), ("relu", "relu")])
def test_hf_activation_names_are_read_as_hugging_face_means_them(tmp_path, hf_name, function):
  folder = write_hf_folder(tmp_path / "hf", hf_tensors(CONFIG, heads=False), hidden_act=hf_name)
  if hf_name is None:  # Hugging Face's default
    values = json.loads((folder / "config.json").read_text())
    del values["hidden_act"]
    (folder / "config.json").write_text(json.dumps(values))
  assert huggingface.read_hf_config(folder).hidden_act == function
  # Converted to a model folder, the function is written by its own name and read back.
  converted = checkpoints.convert("hf", folder, tmp_path / "converted")
  assert json.loads((tmp_path / "converted" / "bert_config.json").read_text())[
      "hidden_act"] == function
  assert checkpoints.read_config(converted).hidden_act == function
  assert load_encoder(converted).transformer_layers[0].activation == function


def test_an_hf_activation_without_a_counterpart_is_refused(tmp_path):
  folder = write_hf_folder(tmp_path / "hf", hf_tensors(CONFIG, heads=False),
                           hidden_act="quick_gelu")
  with pytest.raises(ValueError, match=r"config.json: hidden_act 'quick_gelu' is not supported"):
    load_encoder(folder)


def test_pytorch_file_needs_torch_or_reads_through_it(tmp_path):
  folder = tmp_path / "hf"
  folder.mkdir()
  (folder / "config.json").write_text(json.dumps(hf_config(CONFIG)))
  tensors = hf_tensors(CONFIG, heads=False)
  if importlib.util.find_spec("torch") is None:
    (folder / "pytorch_model.bin").write_bytes(b"not read without torch")
    with pytest.raises(ImportError, match="needs PyTorch.*model.safetensors"):
      load_encoder(folder)
  else:
    import torch  # pylint: disable=import-outside-toplevel
    torch.save({name: torch.from_numpy(value) for name, value in tensors.items()},
               folder / "pytorch_model.bin")
    encoder = load_encoder(folder)
    np.testing.assert_array_equal(encoder.pooler.bias.numpy(), tensors["pooler.dense.bias"])


def test_minilm_weights_land_in_the_encoder():
  folder = minilm_model_dir()
  tensors = load_file(str(folder / "model.safetensors"))
  encoder = BertEncoder(huggingface.read_hf_config(folder))
  huggingface.load_hf_checkpoint(encoder, folder)
  assert encoder.config.num_hidden_layers == 6 and encoder.config.hidden_size == 384
  layer = encoder.transformer_layers[5]
  np.testing.assert_array_equal(layer.attention.qkv.bias.numpy()[768:],
                                tensors["encoder.layer.5.attention.self.value.bias"])
  # Kept as `[out, in]`, the layout of both PyTorch's `Linear` and `TransposedDense`.
  np.testing.assert_array_equal(layer.output_dense.kernel.numpy(),
                                tensors["encoder.layer.5.output.dense.weight"])
  with pytest.raises(ValueError, match="missing"):
    huggingface.load_hf_checkpoint(BertPretrainer(encoder.config), folder)


def test_sharded_safetensors_load(tmp_path):
  tensors = hf_tensors(CONFIG, heads=False)
  folder = write_hf_folder(tmp_path / "hf", {})
  (folder / "model.safetensors").unlink()
  names = sorted(tensors)
  shards = {"model-00001-of-00002.safetensors": names[::2],
            "model-00002-of-00002.safetensors": names[1::2]}
  for shard, shard_names in shards.items():
    save_file({name: tensors[name] for name in shard_names}, str(folder / shard))
  weight_map = {name: shard for shard, shard_names in shards.items() for name in shard_names}
  (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
  encoder = load_encoder(folder)
  np.testing.assert_array_equal(encoder.transformer_layers[1].attention.output_dense.bias.numpy(),
                                tensors["encoder.layer.1.attention.output.dense.bias"])
  np.testing.assert_array_equal(encoder.embeddings.word_embeddings.embeddings.numpy(),
                                tensors["embeddings.word_embeddings.weight"])


@pytest.mark.parametrize("shard", ["../../../outside.safetensors", "sub/../../outside.safetensors",
                                   "/tmp/outside.safetensors"])
def test_a_shard_outside_the_model_folder_is_refused_before_reading(tmp_path, shard):
  tensors = hf_tensors(CONFIG, heads=False)
  folder = write_hf_folder(tmp_path / "a" / "b" / "c" / "hf", {})
  (folder / "model.safetensors").unlink()
  if not shard.startswith("/"):
    # A real shard lies where the index points: only the check keeps it from being read.
    outside = (folder / shard).resolve()
    outside.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(outside))
  (folder / "model.safetensors.index.json").write_text(
      json.dumps({"weight_map": {name: shard for name in tensors}}))
  with pytest.raises(UserError, match=r"the shard '.*' lies outside the model folder"):
    load_encoder(folder)
