"""`BertConfig`: JSON round trip, the released files' extra keys, clear errors, presets."""

import json

import pytest

from official_bert import PRESETS, BertConfig, get_preset

from testing import shared_data


def test_json_round_trip(tmp_path):
  config = BertConfig(vocab_size=99, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                      intermediate_size=96, hidden_act="gelu_exact", hidden_dropout_prob=0.0)
  path = tmp_path / "bert_config.json"
  config.to_json_file(path)
  assert BertConfig.from_json_file(path) == config
  assert json.loads(path.read_text())["hidden_act"] == "gelu_erf"
  assert [p.name for p in tmp_path.iterdir()] == ["bert_config.json"]


@pytest.mark.parametrize("written, canonical, original", [
    ("gelu", "gelu_tanh", "gelu"), ("gelu_new", "gelu_tanh", "gelu"),
    ("gelu_tanh", "gelu_tanh", "gelu"), ("GELU_ERF", "gelu_erf", "gelu_erf"),
    ("gelu_exact", "gelu_erf", "gelu_erf"), ("swish", "silu", "silu"), ("relu", "relu", "relu")])
def test_hidden_act_gelu_is_the_originals_tanh_form_and_is_written_explicitly(
    tmp_path, written, canonical, original):
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(dict(get_preset("bert_tiny").to_dict(), hidden_act=written)))
  config = BertConfig.from_json_file(path)
  assert config.hidden_act == canonical
  config.to_json_file(path)
  assert json.loads(path.read_text())["hidden_act"] == canonical
  config.to_json_file(path, original_names=True)
  assert json.loads(path.read_text())["hidden_act"] == original
  assert BertConfig.from_json_file(path) == config


def test_the_default_activation_is_the_originals():
  assert BertConfig(vocab_size=10).hidden_act == "gelu_tanh"
  assert BertConfig(vocab_size=10, hidden_act="gelu") == BertConfig(vocab_size=10)
  assert get_preset("bert_base").hidden_act == "gelu_tanh"


def test_extra_keys_of_released_files_are_ignored_and_others_need_allowing(tmp_path):
  released = dict(get_preset("bert_mini").to_dict(), directionality="bidi", pooler_fc_size=768,
                  pooler_num_attention_heads=12, pooler_type="first_token_transform")
  path = tmp_path / "bert_config.json"
  path.write_text(json.dumps(released))
  assert BertConfig.from_json_file(path) == get_preset("bert_mini")
  hugging_face = dict(released, layer_norm_eps=1e-12, model_type="bert",
                      architectures=["BertModel"])
  path.write_text(json.dumps(hugging_face))
  with pytest.raises(ValueError, match="unknown field.*architectures, layer_norm_eps, model_type"):
    BertConfig.from_json_file(path)
  assert BertConfig.from_json_file(path, allow_unknown_keys=True) == get_preset("bert_mini")


def test_google_bert_mini_config_loads():
  config = BertConfig.from_json_file(
      shared_data("checkpoints/google_bert_mini_index_only/bert_config.json"))
  assert config == get_preset("bert_mini")


@pytest.mark.parametrize("values, message", [
    ({"vocab_size": None}, "required field.*vocab_size are missing"),
    ({"hidden_size": 30, "num_attention_heads": 4},
     r"hidden_size \(30\) must be a multiple of num_attention_heads \(4\)"),
    ({"vocab_size": "30522"}, "vocab_size must be a positive integer"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
    ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob must be below 1"),
    ({"initializer_range": -1}, "initializer_range must be a finite non-negative"),
    ({"hidden_act": "gelu2"}, "hidden_act: Unknown hidden_act 'gelu2'"),
    ({"hidden_act": 3}, "hidden_act: An activation name must be a string"),
])
def test_invalid_fields_are_named_with_the_file(tmp_path, values, message):
  path = tmp_path / "bert_config.json"
  config = {key: value for key, value in {**get_preset("bert_tiny").to_dict(), **values}.items()
            if value is not None}
  path.write_text(json.dumps(config))
  with pytest.raises(ValueError, match=message) as error:
    BertConfig.from_json_file(path)
  assert str(path) in str(error.value)


def test_malformed_json_names_file_and_line(tmp_path):
  path = tmp_path / "bert_config.json"
  path.write_text('{\n  "vocab_size": 10,\n  "hidden_size": \n}')
  with pytest.raises(ValueError, match=r"bert_config.json: not valid JSON at line 4"):
    BertConfig.from_json_file(path)


def test_presets_cover_base_large_and_the_24_small_berts():
  small = [name for name in PRESETS if name.startswith("bert_L")]
  assert len(small) == 24
  assert get_preset("bert_base") == get_preset("bert_L12_H768")
  assert get_preset("bert_large").hidden_size == 1024
  assert get_preset("bert_L4_H512").num_attention_heads == 8
  assert get_preset("bert_tiny").intermediate_size == 512
  with pytest.raises(ValueError, match="Unknown BERT preset 'bert_huge'"):
    get_preset("bert_huge")
