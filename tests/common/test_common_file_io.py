"""Tests for `official_bert.common.file_io`: atomic writes and globs through TensorFlow's file
systems."""

import pytest
import tensorflow as tf

from official_bert.common import file_io


def test_atomic_write_leaves_only_the_finished_file():
  folder = "ram://test_file_io/atomic"
  file_io.write_text(f"{folder}/a.txt", "one\n")
  file_io.write_text(f"{folder}/a.txt", "two\n")
  assert tf.io.gfile.listdir(folder) == ["a.txt"]
  with tf.io.gfile.GFile(f"{folder}/a.txt") as f:
    assert f.read() == "two\n"


def test_atomic_write_keeps_the_old_file_when_the_writer_fails():
  path = "ram://test_file_io/failing/a.bin"
  with file_io.atomic_write(path, "wb") as f:
    f.write(b"old")
  with pytest.raises(RuntimeError, match="interrupted"):
    with file_io.atomic_write(path, "wb") as f:
      f.write(b"half of the new")
      raise RuntimeError("interrupted")
  assert tf.io.gfile.listdir("ram://test_file_io/failing") == ["a.bin"]
  with tf.io.gfile.GFile(path, "rb") as f:
    assert f.read() == b"old"


def test_atomic_write_rejects_append_mode():
  with pytest.raises(ValueError, match="mode"):
    with file_io.atomic_write("ram://test_file_io/mode.txt", "a"):
      pass


def test_expand_globs_sorts_each_pattern_and_skips_folders(tmp_path):
  for name in ("b.txt", "a.txt", "c.csv"):
    (tmp_path / name).write_text("x")
  (tmp_path / "d.txt").mkdir()
  files = file_io.expand_globs(f"{tmp_path}/*.txt, {tmp_path}/c.csv")
  assert files == [str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), str(tmp_path / "c.csv")]
  assert file_io.expand_globs([f"file://{tmp_path}/a.txt"]) == [f"file://{tmp_path}/a.txt"]


def test_expand_globs_names_the_pattern_that_matched_nothing(tmp_path):
  (tmp_path / "a.txt").write_text("x")
  with pytest.raises(FileNotFoundError, match=r"vocab source '.*missing\*'"):
    file_io.expand_globs(f"{tmp_path}/a.txt,{tmp_path}/missing*", what="vocab source")
  with pytest.raises(FileNotFoundError, match="No input file given"):
    file_io.expand_globs(" , ")


def test_write_folder_moves_the_marker_last_and_keeps_the_old_set_on_failure():
  folder = "ram://test_file_io/folder"

  def fill(text, fail=False):
    def write(staging):
      file_io.write_text(f"{staging}/data.txt", text)
      if fail:
        raise RuntimeError("interrupted")
      file_io.write_text(f"{staging}/manifest.json", text)
    return write

  assert file_io.write_folder(folder, fill("one"), "manifest.json") == ["data.txt",
                                                                        "manifest.json"]
  with pytest.raises(RuntimeError, match="interrupted"):
    file_io.write_folder(folder, fill("two", fail=True), "manifest.json")
  assert sorted(tf.io.gfile.listdir(folder)) == ["data.txt", "manifest.json"]
  with tf.io.gfile.GFile(f"{folder}/data.txt") as f:
    assert f.read() == "one"
  with pytest.raises(FileNotFoundError, match="missing.json was not written"):
    file_io.write_folder(folder, fill("three"), "missing.json")


def test_atomic_path_gives_a_by_name_writer_a_temporary_that_becomes_the_file(tmp_path):
  path = tmp_path / "records.tfrecord"
  with file_io.atomic_path(path) as temporary:
    with tf.io.TFRecordWriter(temporary) as writer:
      writer.write(b"one")
    assert not path.exists()
  assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == [b"one"]
  with pytest.raises(RuntimeError):
    with file_io.atomic_path(path) as temporary:
      with tf.io.TFRecordWriter(temporary) as writer:
        writer.write(b"two")
      raise RuntimeError("interrupted")
  assert [p.name for p in tmp_path.iterdir()] == ["records.tfrecord"]
