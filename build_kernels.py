"""`python build_kernels.py`: the package's C++ kernels for this CPU (`bert-build-kernels`).

Its flags and documentation are in `official_bert/cli/build_kernels.py`.
"""

from official_bert.cli import build_kernels

if __name__ == "__main__":
  build_kernels.run()
