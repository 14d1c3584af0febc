"""The package's C++ kernels as built and loaded: named instruction sets from the CPU flags, the
build command and its record, and a run that never compiles and skips damaged or foreign builds
with one line."""

import json
import os
import shutil
import sys

import pytest
import tensorflow as tf

from official_bert.common.errors import UserError
from official_bert.ops import native

from testing import REPOSITORY, run_python

SOURCE = "adam_update.cc"  # the smaller of the two, for the tests that compile


@pytest.fixture
def built(native_kernels):
  """The session's builds (`conftest.py`); skips where no compiler could build them."""
  if native_kernels is not None:
    pytest.skip(f"no C++ compiler: {native_kernels}")


@pytest.fixture
def cache(tmp_path, monkeypatch, built):
  """A cache folder of this test's own, holding copies of the session's builds, which `load`
  reads."""
  del built
  session = native.library_path(SOURCE).parent
  folder = native.library_path(SOURCE, tmp_path).parent
  shutil.copytree(session, folder, ignore=shutil.ignore_patterns("*.lock", "*.partial"))
  monkeypatch.setenv(native.CACHE_VARIABLE, str(tmp_path))
  native.load.cache_clear()
  native._logged.clear()  # pylint: disable=protected-access
  yield tmp_path
  native.load.cache_clear()


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def test_the_instruction_set_is_named_from_the_cpu_flags():
  avx2 = {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "abm", "movbe", "popcnt", "sse4_2"}
  avx512 = avx2 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
  assert native.isa(avx512 | {"amx_bf16", "avx512_bf16"}, "x86_64") == "avx512"
  assert native.isa(avx512 - {"avx512vl"}, "x86_64") == "avx2"
  assert native.isa(avx2, "x86_64") == "avx2"
  assert native.isa({"sse2", "avx"}, "x86_64") == "x86_64"
  assert native.isa(avx512, "aarch64") == "generic"
  assert native.isa() in native.ISA_LEVELS
  for level in native.ISA_LEVELS:
    flags = native.compile_flags(level)
    assert "-march=native" not in flags and "-O3" in flags
  assert "-mavx512f" in native.compile_flags("avx512")
  assert not any(f.startswith("-mavx") for f in native.compile_flags("x86_64"))


def test_a_build_records_what_it_was_built_for_and_is_reused(built):
  library = native.library_path(SOURCE)
  record = json.loads(library.with_suffix(".json").read_text())
  assert record["isa"] == native.isa() and record["tensorflow"] == tf.__version__
  assert record["flags"] == native.compile_flags(native.isa())
  assert native.check(SOURCE) is None
  modified = library.stat().st_mtime_ns
  again = native.build(SOURCE)
  assert again.reason == "up to date" and again.seconds == 0
  assert library.stat().st_mtime_ns == modified
  assert not [p for p in library.parent.iterdir() if p.name.endswith(".partial")]


def test_a_run_without_builds_logs_one_line_naming_the_command(tmp_path, monkeypatch, caplog):
  monkeypatch.setenv(native.CACHE_VARIABLE, str(tmp_path))
  monkeypatch.setattr(native, "_logged", set())
  native.load.cache_clear()
  try:
    assert [native.load(source) for source in native.SOURCES] == [None, None]
  finally:
    native.load.cache_clear()
  lines = _warnings(caplog)
  assert len(lines) == 1 and "bert-build-kernels" in lines[0] and native.isa() in lines[0]
  assert not list(tmp_path.iterdir())  # nothing was built


def _copying_compiler(folder, library):
  """A stand-in for the C++ compiler that writes a copy of `library` where `-o` says (the real
  compile is the session's, `conftest.py`)."""
  good = folder / "good.so"
  shutil.copy(library, good)
  compiler = folder / "copying-compiler"
  compiler.write_text('#!/bin/sh\nwhile [ "$#" -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
                      f'cp "{good}" "$out"\n')
  compiler.chmod(0o755)
  return str(compiler)


def test_a_damaged_library_is_skipped_by_a_run_and_rebuilt_by_the_command(cache, caplog):
  library = native.library_path(SOURCE)
  compiler = _copying_compiler(cache, library)
  library.write_bytes(b"garbage, not a shared library")
  assert "damaged" in native.check(SOURCE)
  assert native.load(SOURCE) is None
  lines = _warnings(caplog)
  assert len(lines) == 1 and str(library) in lines[0] and "bert-build-kernels" in lines[0]
  rebuilt = native.build(SOURCE, compiler=compiler)
  assert "damaged" in rebuilt.reason and rebuilt.seconds > 0
  native.load.cache_clear()
  assert native.load(SOURCE) is not None


def test_a_library_recorded_for_other_cpu_flags_is_skipped(cache, caplog):
  record_path = native.library_path(SOURCE).with_suffix(".json")
  record = json.loads(record_path.read_text())
  record_path.write_text(json.dumps(dict(record, isa="some_other_isa")))
  problem = native.check(SOURCE)
  assert "built for other isa ('some_other_isa'" in problem
  assert native.load(SOURCE) is None
  lines = _warnings(caplog)
  assert len(lines) == 1 and "some_other_isa" in lines[0]
  record_path.write_text("{ not json")
  assert "missing or damaged" in native.check(SOURCE)


def test_a_failed_build_says_why_and_leaves_nothing(tmp_path):
  with pytest.raises(UserError, match="no C\\+\\+ compiler"):
    native.build(SOURCE, tmp_path, compiler=str(tmp_path / "no-such-compiler"))
  with pytest.raises(RuntimeError, match="failed on .*adam_update.cc"):
    native.build(SOURCE, tmp_path, compiler=shutil.which("false"))
  folder = native.library_path(SOURCE, tmp_path).parent
  assert not list(folder.iterdir())  # no partial library, no record
  with pytest.raises(UserError, match="must be a local folder"):
    native.build(SOURCE, "gs://bucket/cache")


def _command(*args, cache_dir):
  return run_python([sys.executable, str(REPOSITORY / "build_kernels.py"), *args,
                     f"--cache_dir={cache_dir}"], timeout=600)


def test_the_command_reports_what_it_built_and_refuses_an_unknown_level(cache):
  result = _command(cache_dir=cache)
  assert result.returncode == 0, result.stderr[-2000:]
  for source in native.SOURCES:
    assert f"Up to date: {source} for {native.isa()}" in result.stdout
  result = _command("--isa=avx9000", cache_dir=cache)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1] == (
      "error: flag --isa=avx9000: value should be one of <avx512|avx2|x86_64|generic> "
      "(see --help)")


def test_a_second_cache_in_one_process_gets_the_library_already_loaded(cache, tmp_path_factory):
  # TensorFlow cannot unload a library, and a second copy's kernels would clash with the first's
  # ("Multiple OpKernel registrations match NodeDef") at the next run of one of its ops.
  first = native.load(SOURCE)
  other = tmp_path_factory.mktemp("other_cache")
  shutil.copytree(native.library_path(SOURCE).parent, native.library_path(SOURCE, other).parent)
  os.environ[native.CACHE_VARIABLE] = str(other)  # `cache` puts the variable back
  native.load.cache_clear()
  assert native.load(SOURCE) is first
  gradient = tf.constant([3.0, 4.0], tf.bfloat16)
  assert float(tf.function(first.squared_norm_bfloat16)(gradient)) == 25.0
