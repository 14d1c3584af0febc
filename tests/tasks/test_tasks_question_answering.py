"""`SquadTask`: learning on templated facts and on real SQuAD paragraphs, the prediction files
and `eval_results.txt`, SQuAD v2.0 and its null threshold, the export, misuse, and the original
README command."""

import copy
import json
import math
import os
import random
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_bert import BertConfig, BertEncoder
from official_bert.checkpoints import save_tf1_checkpoint
from official_bert.data.squad import SquadFormatError
from official_bert.evaluation.squad_evaluate import normalize_answer
from official_bert.evaluation.squad_postprocessing import NO_SPAN_SCORE_DIFF
from official_bert.tasks import question_answering
from official_bert.tasks.experiment import ExperimentConfig
from official_bert.tokenization import BasicTokenizer

from testing import (
  SPECIAL_TOKENS,
  assert_no_scheme_folders,
  engine_configs,
  file_uri,
  read_eval_results,
  run_command_line,
  run_task,
  shared_data,
  tiny_bert_config,
)

FIRST = ("Alice", "Bruno", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ines", "Jonas",
         "Kofi", "Lena", "Marco", "Nadia", "Oscar", "Petra", "Rosa", "Sven", "Tara", "Umar")
LAST = ("Smith", "Kowalski", "Tanaka", "Okafor", "Berg", "Silva", "Novak", "Haddad", "Larsen",
        "Moreau", "Ivanov", "Keller")
CITIES = ("Paris", "Lagos", "Oslo", "Lima", "Cairo", "Tokyo", "Quito", "Dublin", "Hanoi", "Nairobi",
          "Prague", "Madrid", "Vienna", "Seoul", "Athens", "Bogota", "Manila", "Perth", "Zurich")
JOBS = ("baker", "nurse", "pilot", "farmer", "teacher", "lawyer", "painter", "chemist", "sailor",
        "tailor", "miner", "judge")


def _facts(seed, num_paragraphs, unanswerable=False):
  """SQuAD JSON of generated facts, e.g. "Vera Berg was born in Hanoi in 1935. Vera worked as a
  pilot in Lima." (the sentences in random order), asking for the birthplace, year, job and
  workplace; with `unanswerable`, a v2.0 file that also asks for the name of the person's dog,
  which no context gives."""
  rng = random.Random(seed)
  paragraphs = []
  for index in range(num_paragraphs):
    first = rng.choice(FIRST)
    name = f"{first} {rng.choice(LAST)}"
    born, work = rng.sample(CITIES, 2)
    year, job = str(rng.randrange(1900, 2000, 5)), rng.choice(JOBS)
    sentences = [f"{name} was born in {born} in {year}.", f"{first} worked as a {job} in {work}."]
    rng.shuffle(sentences)
    context = " ".join(sentences)

    def answer(text, sentence_word, context=context):
      return [{"text": text, "answer_start": context.index(text, context.index(sentence_word))}]

    qas = [(f"Where was {name} born?", answer(born, "born")),
           (f"When was {name} born?", answer(year, "born")),
           (f"What did {name} work as?", answer(job, "worked")),
           (f"Where did {name} work?", answer(work, "worked"))]
    if unanswerable:
      qas.append((f"What was the name of {name}'s dog?", []))
    questions = []
    for q, (question, answers) in enumerate(qas):
      questions.append({"id": f"s{seed}p{index}q{q}", "question": question, "answers": answers})
      if unanswerable:
        questions[-1]["is_impossible"] = not answers
    paragraphs.append({"context": context, "qas": questions})
  return {"version": "2.0" if unanswerable else "1.1",
          "data": [{"title": "facts", "paragraphs": paragraphs}]}


def _write_json(path, value):
  path.write_text(json.dumps(value))
  return str(path)


def _model_files(directory, data_sets=(), vocab_file=None, max_position_embeddings=128,
                 hidden_size=64):
  """`vocab.txt` (the given one, or the basic tokens of `data_sets`) and a tiny `bert_config.json`
  (`hidden_size` wide, 4 heads, a feed-forward 4 times as wide).

  The initializer range 0.2 (not BERT's 0.02) lets a 2-layer model trained from scratch leave the
  plateau where its attention ignores the question within a few dozen steps.
  """
  os.makedirs(directory, exist_ok=True)
  if vocab_file is None:
    tokenizer, words = BasicTokenizer(do_lower_case=True), set()
    for data in data_sets:
      for paragraph in data["data"][0]["paragraphs"]:
        words.update(tokenizer.tokenize(paragraph["context"]))
        for qa in paragraph["qas"]:
          words.update(tokenizer.tokenize(qa["question"]))
    vocab_file = os.path.join(directory, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
      f.write("\n".join(SPECIAL_TOKENS + sorted(words)) + "\n")
  with open(vocab_file, encoding="utf-8") as f:
    vocab_size = sum(1 for _ in f)
  config_file = os.path.join(directory, "bert_config.json")
  tiny_bert_config(vocab_size, hidden_size=hidden_size, num_attention_heads=4,
                   intermediate_size=4 * hidden_size,
                   max_position_embeddings=max_position_embeddings, dropout=0.0,
                   initializer_range=0.2).to_json_file(config_file)
  return config_file, vocab_file


def _run(model, output_dir, *, epochs=None, **kwargs):
  """`SquadTask` through the driver with the tiny model; it trains when `epochs` is given.
  Returns the scores of `eval_results.txt` (empty when the run scored nothing)."""
  config = ExperimentConfig(output_dir=str(output_dir),
                            export_dir=kwargs.pop("export_dir", None),
                            **engine_configs(train_batch_size=16, predict_batch_size=32,
                                             learning_rate=1e-3, num_train_epochs=epochs or 1.0,
                                             enable_xla=False, seed=1, steps_per_loop=100,
                                             log_steps=100))
  values = dict(max_seq_length=64, doc_stride=32, max_query_length=24, do_predict=True,
                do_train=epochs is not None)
  values.update(kwargs)
  run_task(question_answering.SquadTask, bert_config_file=model[0], vocab_file=model[1],
           config=config, **values)
  results = output_dir / "eval_results.txt"
  return read_eval_results(results) if results.exists() else {}


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
  """A model fine-tuned on 40 generated paragraphs and evaluated on 20 others, and an untrained
  one evaluated on the same; the trained one is also exported."""
  directory = tmp_path_factory.mktemp("facts")
  train, test = _facts(seed=1, num_paragraphs=40), _facts(seed=2, num_paragraphs=20)
  files = {"train_file": _write_json(directory / "train.json", train),
           "predict_file": _write_json(directory / "test.json", test)}
  model = _model_files(str(directory / "model"), [train, test])
  untrained = _run(model, directory / "untrained", predict_file=files["predict_file"],
                   verbose_logging=True)
  # 160 questions / 16 per batch * 15 epochs = 150 steps, which reach an F1 of about 99.
  trained = _run(model, directory / "trained", epochs=15.0, export_dir=str(directory / "export"),
                 **files)
  return dict(files, directory=directory, untrained=untrained, trained=trained, test=test)


def test_span_loss_is_the_mean_of_the_start_and_end_cross_entropies():
  start_logits = np.array([[1.0, 2.0, 0.5, -1.0], [0.0, 0.0, 3.0, 1.0]], "float32")
  end_logits = np.array([[0.0, -2.0, 4.0, 1.0], [2.0, 1.0, 0.0, 0.0]], "float32")
  starts, ends = np.array([1, 2]), np.array([2, 0])

  def cross_entropy(logits, positions):
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -log_probs[np.arange(len(positions)), positions].mean()

  losses = question_answering.span_loss({"start_logits": start_logits, "end_logits": end_logits},
                                        {"start_positions": starts, "end_positions": ends})
  expected_start = cross_entropy(start_logits, starts)
  expected_end = cross_entropy(end_logits, ends)
  np.testing.assert_allclose(float(losses["start_loss"]), expected_start, rtol=1e-5)
  np.testing.assert_allclose(float(losses["end_loss"]), expected_end, rtol=1e-5)
  np.testing.assert_allclose(float(losses["loss"]), (expected_start + expected_end) / 2, rtol=1e-5)


@pytest.mark.slow
def test_fine_tuning_learns_templated_facts_and_writes_the_original_outputs(facts):
  before, after = facts["untrained"], facts["trained"]
  print(f"templated facts, 80 held-out questions: F1 {before['f1']:.1f} untrained -> "
        f"{after['f1']:.1f} after 150 steps")
  assert before["f1"] < 25.0 and before["global_step"] == 0
  assert after["f1"] > 85.0 and after["exact_match"] > 80.0
  trained = facts["directory"] / "trained"
  assert sorted(after) == ["exact_match", "f1", "global_step"]
  assert after["global_step"] == 150
  assert sum(1 for _ in tf.data.TFRecordDataset(str(trained / "train.tf_record"))) == 160

  question_ids = {qa["id"] for p in facts["test"]["data"][0]["paragraphs"] for qa in p["qas"]}
  predictions = json.loads((trained / "predictions.json").read_text())
  nbest = json.loads((trained / "nbest_predictions.json").read_text())
  assert set(predictions) == set(nbest) == question_ids
  for qas_id, entries in nbest.items():
    assert 1 <= len(entries) <= 20 and entries[0]["text"] == predictions[qas_id]
    assert math.isclose(sum(entry["probability"] for entry in entries), 1.0, rel_tol=1e-6)
    scores = [entry["start_logit"] + entry["end_logit"] for entry in entries]
    assert scores == sorted(scores, reverse=True)
  assert not (trained / "null_odds.json").exists()
  # The fine-tuned model folder, for export_saved_model.py.
  assert json.loads((trained / "model.json").read_text())["kind"] == "span_labeler"


@pytest.mark.slow
def test_the_export_answers_a_raw_question_about_a_raw_context(facts):
  import tensorflow_text  # noqa: F401  (registers the ops of the SavedModel's tokenizer)
  served = tf.saved_model.load(str(facts["directory"] / "export"))
  context = "Vera Berg was born in Hanoi in 1935. Vera worked as a pilot in Lima."
  questions = ["Where was Vera Berg born?", "When was Vera Berg born?",
               "What did Vera Berg work as?", "Where did Vera Berg work?"]
  outputs = served.signatures["serving_default"](
      question=tf.constant(questions), context=tf.constant([context] * 4))
  assert outputs["start_logits"].shape == outputs["end_logits"].shape == (4, 64)
  answers = [text.decode() for text in outputs["answer_text"].numpy()]
  # The model scores 99% on held-out facts: allow one miss on other CPUs' numerics.
  assert sum(a == b for a, b in zip(answers, ["Hanoi", "1935", "pilot", "Lima"])) >= 3, answers
  starts, ends = outputs["answer_start"].numpy(), outputs["answer_end"].numpy()
  assert [context[s:e] for s, e in zip(starts, ends)] == answers


@pytest.mark.slow
def test_squad_v2_learns_unanswerable_questions_and_applies_the_null_threshold(tmp_path):
  train, test = (_facts(seed=3, num_paragraphs=32, unanswerable=True),
                 _facts(seed=4, num_paragraphs=8, unanswerable=True))
  files = {"train_file": _write_json(tmp_path / "train.json", train),
           "predict_file": _write_json(tmp_path / "dev.json", test)}
  model = _model_files(str(tmp_path / "model"), [train, test])
  output_dir = tmp_path / "output"
  # 160 questions / 16 per batch * 8 epochs = 80 steps, which reach NoAns F1 100, HasAns 97.
  results = _run(model, output_dir, epochs=8.0, version_2_with_negative=True, **files)
  print(f"SQuAD v2.0 format, 40 questions: {dict(results)}")
  assert sorted(results) == sorted([
      "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
      "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh",
      "global_step"])
  assert (results["total"], results["HasAns_total"], results["NoAns_total"]) == (40, 32, 8)
  assert results["NoAns_f1"] > 75.0 and results["HasAns_f1"] > 60.0

  predictions = json.loads((output_dir / "predictions.json").read_text())
  null_odds = json.loads((output_dir / "null_odds.json").read_text())
  assert set(null_odds) == set(predictions) and len(predictions) == 40
  # "" exactly where the null score beats the best span by more than the threshold (0.0).
  assert all((predictions[k] == "") == (null_odds[k] > 0.0) for k in predictions)
  for qas_id, entries in json.loads((output_dir / "nbest_predictions.json").read_text()).items():
    assert "" in [entry["text"] for entry in entries], qas_id

  # Predicting again with a threshold above any score difference of real logits answers every
  # question with a span, from the same null odds.
  rerun = _run(model, output_dir, version_2_with_negative=True, null_score_diff_threshold=1e5,
               predict_file=files["predict_file"])
  assert rerun["global_step"] == results["global_step"]
  assert json.loads((output_dir / "null_odds.json").read_text()) == pytest.approx(null_odds)
  rerun_predictions = json.loads((output_dir / "predictions.json").read_text())
  assert all((rerun_predictions[k] == "") == (null_odds[k] > 1e5) for k in predictions)
  assert all(odds < NO_SPAN_SCORE_DIFF for odds in null_odds.values())
  assert "" not in rerun_predictions.values()
  # An unanswerable question now counts as exact only when its span normalises to nothing (an
  # article or punctuation alone), as the official evaluator scores it.
  unanswerable = [qa["id"] for article in test["data"] for paragraph in article["paragraphs"]
                  for qa in paragraph["qas"] if qa.get("is_impossible")]
  empty = sum(normalize_answer(rerun_predictions[k]) == "" for k in unanswerable)
  assert rerun["NoAns_exact"] == pytest.approx(100.0 * empty / len(unanswerable))
  assert rerun["HasAns_exact"] >= results["HasAns_exact"]


@pytest.mark.slow
def test_real_squad_paragraphs_are_learned(tmp_path):
  """Over-fits 6 paragraphs of the real SQuAD v1.1 dev set (16 questions, several answers each,
  contexts split into 128-piece windows) with the uncased BERT vocabulary."""
  dev = json.loads(shared_data("squad/dev-v1.1.json").read_text())
  vocab = str(shared_data("vocab/bert-base-uncased-vocab.txt"))
  article = dict(dev["data"][2], paragraphs=dev["data"][2]["paragraphs"][:6])
  gold = {"version": "1.1", "data": [article]}
  # Training takes each question's first answer; the evaluation scores against all of them.
  train = copy.deepcopy(gold)
  for paragraph in train["data"][0]["paragraphs"]:
    for qa in paragraph["qas"]:
      qa["answers"] = qa["answers"][:1]
  files = {"train_file": _write_json(tmp_path / "train.json", train),
           "predict_file": _write_json(tmp_path / "gold.json", gold)}
  model = _model_files(str(tmp_path / "model"), vocab_file=vocab)
  windows = dict(max_seq_length=128, doc_stride=64, max_query_length=32)
  before = _run(model, tmp_path / "untrained", predict_file=files["predict_file"], **windows)
  # 1 step an epoch: 30 steps reach an F1 of 100 (20 do already).
  after = _run(model, tmp_path / "trained", epochs=30.0, **files, **windows)
  print(f"Normans, 6 paragraphs, 16 questions: F1 {before['f1']:.1f} untrained -> "
        f"{after['f1']:.1f} after {after['global_step']} steps")
  assert before["f1"] < 25.0
  assert after["f1"] > 80.0


def test_misuse_and_bad_files_are_reported_before_any_work(tmp_path):
  model = _model_files(str(tmp_path / "model"), [_facts(seed=5, num_paragraphs=2)])
  with pytest.raises(ValueError, match="train_file must be specified"):
    _run(model, tmp_path / "out", epochs=1.0, predict_file="unused.json")
  with pytest.raises(ValueError, match="must be greater than max_query_length"):
    _run(model, tmp_path / "out", predict_file="unused.json", max_query_length=64)
  bad = tmp_path / "bad.json"
  bad.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": "A cat."}]}]}))
  with pytest.raises(SquadFormatError, match="paragraph 0: missing field 'qas'"):
    _run(model, tmp_path / "out", epochs=1.0, train_file=str(bad), do_predict=False)
  # The predict file is read before training too.
  good = _write_json(tmp_path / "good.json", _facts(seed=5, num_paragraphs=2))
  with pytest.raises(SquadFormatError, match="paragraph 0: missing field 'qas'"):
    _run(model, tmp_path / "out", epochs=1.0, train_file=good, predict_file=str(bad))
  assert not (tmp_path / "out" / "train.tf_record").exists()
  with pytest.raises(ValueError, match="cannot eval"):
    _run(model, tmp_path / "out", predict_file=good, do_eval=True)


def test_the_original_readme_command_runs_unchanged(tmp_path):
  """The SQuAD v1.1 command of the original README, on a tiny TF1 checkpoint and generated facts."""
  squad_dir, bert_dir = tmp_path / "squad", tmp_path / "tiny_bert"
  squad_dir.mkdir()
  train, dev = _facts(seed=6, num_paragraphs=6), _facts(seed=7, num_paragraphs=3)
  _write_json(squad_dir / "train-v1.1.json", train)
  _write_json(squad_dir / "dev-v1.1.json", dev)
  # Nothing is learned in its 4 steps: the narrowest model will do.
  config_file, _ = _model_files(str(bert_dir), [train, dev], max_position_embeddings=384,
                                hidden_size=16)
  save_tf1_checkpoint(BertEncoder(BertConfig.from_json_file(config_file)),
                      str(bert_dir / "bert_model.ckpt"))
  # Every path a file:// URL, as gs:// ones would be given.
  variables = {"SQUAD_DIR": file_uri(squad_dir), "BERT_BASE_DIR": file_uri(bert_dir)}
  command = (f"{sys.executable} run_squad.py --vocab_file=$BERT_BASE_DIR/vocab.txt "
             "--bert_config_file=$BERT_BASE_DIR/bert_config.json "
             "--init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt --do_train=True "
             "--train_file=$SQUAD_DIR/train-v1.1.json --do_predict=True "
             "--predict_file=$SQUAD_DIR/dev-v1.1.json --train_batch_size=12 --learning_rate=3e-5 "
             "--num_train_epochs=2.0 --max_seq_length=384 --doc_stride=128 "
             f"--output_dir={file_uri(tmp_path)}/squad_base/")
  completed = run_command_line(command, variables)
  assert completed.returncode == 0, completed.stderr[-3000:]
  output_dir = tmp_path / "squad_base"
  results = read_eval_results(output_dir / "eval_results.txt")
  assert sorted(results) == ["exact_match", "f1", "global_step"]
  assert results["global_step"] == 4  # int(24 questions / 12 * 2.0 epochs)
  predictions = json.loads((output_dir / "predictions.json").read_text())
  assert len(predictions) == 12 and all(isinstance(text, str) for text in predictions.values())
  assert (output_dir / "nbest_predictions.json").exists()
  assert_no_scheme_folders(tmp_path)
