#!/usr/bin/env bash
# Run the whole end-to-end plan in order, resumably: rerun to continue.
#
#   nohup benchmarks/run_end_to_end.sh &          # from the repository root; returns at once
#   tail -f ~/.cache/rag_complexity_agents/benchmarks/end_to_end.log
#
# Each stage is one call of benchmarks/end_to_end.py for a slice of the plan, cheap rows first
# (single-step, gold evidence and no-retrieval take one LLM call per question). Every call
# rewrites benchmarks/results/end_to_end.{json,md} with all rows finished so far, so partial
# results can be committed at any time; `STAGES=report benchmarks/run_end_to_end.sh` only
# rebuilds them. Finished questions are kept in the run files and LLM calls in the cache, so
# a stage stopped at any point (e.g. killed) continues where it was. A failing
# stage is logged and the next one runs. Only one runner at a time (a lock file).
#
# Environment (defaults in brackets):
#   PYTHON [.venv/bin/python]   DATA [../shared/data]   NICE [5]
#   MODEL [llamacpp:qwen2.5-0.5b]   STRONG_MODEL [llamacpp:qwen2.5-coder-1.5b] ('' = none;
#     needs the [qwen15b] extra)
#   BEST_LOOPS [plan_execute,plan_execute_mer]: the loops of the main and strong rows; the
#     first is "the" best loop (the Δ-vs-best-loop column, and the loop whose variants run).
#     Plan-and-execute, chosen on the dev rows of decomposition_dev.md, scores like Self-Ask +
#     SUNAR at a third or less of its LLM calls (end_to_end.md); plan_execute_mer, the same
#     loop with MER, the plan checks and the second reading, is the default pipeline;
#     plan_execute's rows run without the checks and the second reading, as the named
#     baseline (end_to_end.py's BASELINES), and its variant
#     plan_execute_checks is the default without MER. Self-Ask + SUNAR is an ablation row
#     (n = 50; the ablation rows are the paper's loops not named here). Keep the value fixed
#     between calls
#   STAGES [all, in this order]: main_single ceiling_evidence ceiling_decomposition
#     strong_single strong_best main_loop strong_router main_router strong_ceiling
#     strong_peers strong_rest no_retrieval ablation peers strong_ablation report
#     (strong_best: the first best loop with the strong model; *_router: the router row
#     (single-step or the best loop); strong_ceiling: the ceilings with it; strong_peers: the peer
#     rows with it;
#     strong_rest: its other rows, i.e. the other best loops and the best loop's variants;
#     strong_ablation: the ablation rows with it)
#   EXTRA_ARGS [--set agents.stop=evidence]: more end_to_end.py arguments for every stage.
#     Evidence-driven stopping is what made the loop decompose on the dev questions
#     (benchmarks/results/decomposition_dev.md: 2+ sub-questions on 19 of 20, evidence R@5 70.0
#     vs 57.5 with the 1.5B); the same value for every stage keeps the rows' settings equal
#   LOG [~/.cache/rag_complexity_agents/benchmarks/end_to_end.log]
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
DATA=${DATA:-../shared/data}
NICE=${NICE:-5}
MODEL=${MODEL:-llamacpp:qwen2.5-0.5b}
STRONG_MODEL=${STRONG_MODEL-llamacpp:qwen2.5-coder-1.5b}
BEST_LOOPS=${BEST_LOOPS:-plan_execute,plan_execute_mer}
STAGES=${STAGES:-main_single ceiling_evidence ceiling_decomposition strong_single strong_best main_loop strong_router main_router strong_ceiling strong_peers strong_rest no_retrieval ablation peers strong_ablation report}
LOG=${LOG:-$HOME/.cache/rag_complexity_agents/benchmarks/end_to_end.log}
read -r -a EXTRA <<<"${EXTRA_ARGS---set agents.stop=evidence}"

mkdir -p "$(dirname "$LOG")"
exec 9>"$LOG.lock"
if ! flock -n 9; then
  echo "another run_end_to_end.sh is running (lock $LOG.lock)" >&2
  exit 1
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False LANGSMITH_TRACING=false
common=(--data "$DATA" --model "$MODEL" --strong-model "$STRONG_MODEL" --best-loops "$BEST_LOOPS"
        --quiet "${EXTRA[@]}")

stage() {
  local name=$1
  shift
  echo "== $(date -u +%FT%TZ) stage $name start (load $(cut -d' ' -f1-3 /proc/loadavg)): $*" >>"$LOG"
  nice -n "$NICE" "$PYTHON" benchmarks/end_to_end.py "${common[@]}" "$@" >>"$LOG" 2>&1
  local rc=$?
  echo "== $(date -u +%FT%TZ) stage $name exit $rc (load $(cut -d' ' -f1-3 /proc/loadavg))" >>"$LOG"
  echo "stage $name: exit $rc"
}

for name in $STAGES; do
  case $name in
    main_single) stage "$name" --roles main --strategies single_step ;;
    ceiling_evidence) stage "$name" --roles ceiling --strategies gold_evidence ;;
    no_retrieval) stage "$name" --roles ablation --strategies no_retrieval --models "$MODEL" ;;
    ceiling_decomposition) stage "$name" --roles ceiling --strategies gold_decomposition,gold_bridges ;;
    main_loop) stage "$name" --roles main --strategies "$BEST_LOOPS" ;;
    main_router) stage "$name" --roles main --strategies adaptive ;;
    strong_single) [ -n "$STRONG_MODEL" ] && stage "$name" --roles strong --strategies single_step ;;
    strong_best) [ -n "$STRONG_MODEL" ] && stage "$name" --roles strong --strategies "${BEST_LOOPS%%,*}" ;;
    strong_router) [ -n "$STRONG_MODEL" ] && stage "$name" --roles strong --strategies adaptive ;;
    strong_ceiling) [ -n "$STRONG_MODEL" ] && stage "$name" --roles strong --strategies gold_evidence,gold_decomposition,gold_bridges ;;
    ablation) stage "$name" --roles ablation --models "$MODEL" ;;
    strong_ablation) [ -n "$STRONG_MODEL" ] && stage "$name" --roles ablation --models "$STRONG_MODEL" ;;
    peers) stage "$name" --roles peer --models "$MODEL" ;;
    strong_peers) [ -n "$STRONG_MODEL" ] && stage "$name" --roles strong --strategies llamaindex_subquestion,langgraph_react_agent ;;
    strong_rest) [ -n "$STRONG_MODEL" ] && stage "$name" --roles strong ;;
    report) stage "$name" --report-only ;;
    *) echo "unknown stage $name" | tee -a "$LOG" >&2 ;;
  esac
done
echo "done; results in benchmarks/results/end_to_end.md (log $LOG)"
