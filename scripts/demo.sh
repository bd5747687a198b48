#!/usr/bin/env bash
# The main job on the embedded defaults: ingest real sample videos into one memory, then
# look inside it and answer questions from it. Usage: scripts/demo.sh [SHARED_DIR] [MEMORY_DB]
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED="${1:-../shared}"
DB="${2:-out/demo.db}"
M=.venv/bin/m3agent
VIDEOS=(
  "$SHARED/media/video/iianet_debate_trump_clinton.mp4"
  "$SHARED/media/video/hdtf_talking_heads/WDA_KatieHill_000.mp4"
  "$SHARED/media/video/hdtf_talking_heads/WDA_EdMarkey0_000.mp4"
)
for video in "${VIDEOS[@]}"; do
  if [ ! -f "$video" ]; then
    echo "sample video $video not found: put the shared media folder beside the repo (../shared)" >&2
    exit 2
  fi
done

mkdir -p "$(dirname "$DB")"
rm -f "$DB" "$DB"-wal "$DB"-shm
for video in "${VIDEOS[@]}"; do
  echo "==> m3agent ingest $video" >&2
  "$M" ingest "$video" --memory "$DB"
done

echo "==> m3agent show videos / characters" >&2
"$M" show videos --memory "$DB"
"$M" show characters --memory "$DB"
echo "==> m3agent show --clip 0 (debate)" >&2
"$M" show --memory "$DB" --video iianet_debate_trump_clinton --clip 0

ask() {
  echo "==> m3agent ask \"$1\"" >&2
  "$M" ask --memory "$DB" "$1"
}
# Embedded default (grounded mode, the packaged Qwen2.5-1.5B): the model writes a short answer and names
# the memories it used; those are the cited evidence, with video, clip and times. --llm none: the reranker
# quotes one memory instead (select mode, no model).
ask "Who said they were a senator from New York?"
ask "Who is in DC for new member orientation?"
ask "Which two people talk about being a senator?"   # needs two memories (one of each speaker)
echo "==> the same question as JSON, with evidence clips and timestamps" >&2
"$M" ask --memory "$DB" "Who said they were a senator from New York?" --json
# `m3agent ask` left the model loaded for the next question (setting model_keep_alive_s, 5 minutes): each
# ask above after the first skipped loading it. Free its memory now rather than in 5 minutes.
echo "==> m3agent models stop (the model the asks kept loaded)" >&2
"$M" models stop
