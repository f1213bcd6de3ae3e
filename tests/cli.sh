#!/bin/sh
# CLI tests: one case per line of the table below, "EXIT|ARGS|TEXT": run `autopar ARGS`, expect exit status
# EXIT and TEXT somewhere in its stdout or stderr. Errors must be one line. Prints "ok"/"not ok" per case.
bin=${1:-bin/autopar}
abs_bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin") # for cases that run from another directory
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '{"model_type": "llama",\n  "hidden_size": 64,\n  "num_hidden_layers": 2,, }\n' >"$tmp/malformed.json"
printf '{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":4,"vocab_size":100}' >"$tmp/kv.json"
printf '{"model_type":"llama","hidden_size":-64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100}' >"$tmp/neg.json"
printf '{"model_type":"rwkv","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":100}' >"$tmp/type.json"
printf 'id,gpu\n"a"b,h100\n' >"$tmp/badquote.csv"
printf 'id,model,arch,num_layers,hidden_size,num_attention_heads,vocab_size,seq_length,mlp,gpu,num_gpus,global_batch_size,micro_batch_size,tp,pp,dp,recompute,zero_stage,precision,outcome,measured_tokens_per_s_per_gpu\ngpt-1,GPT 1.3B,dense,24,2048,16,51200,2048,gelu,a100-80gb,8,512,4,1,1,8,none,1,bf16,ok,10000\nllama-16,Llama 1B,dense,16,2048,16,32000,4096,swiglu,h100-sxm,16,64,,,,,,,,ok,20000\n' >"$tmp/small_runs.csv"
printf 'id,model,arch,num_layers,hidden_size,num_attention_heads,num_kv_heads,vocab_size,seq_length,mlp,num_experts,top_k,gpu,num_gpus,global_batch_size,outcome,measured_tokens_per_s_per_gpu\noss,GPT OSS 120B,moe,36,2880,64,8,201088,4096,swiglu,128,4,b200,8,64,ok,10000\nother,GPT OSS 120B,moe,36,2880,48,8,201088,4096,swiglu,128,4,b200,8,64,ok,10000\n' >"$tmp/named_runs.csv"
# Problem files for `autopar solve` (docs/solve.md); cases marked "N+ilp" need the ilp part and are skipped
# (counted ok) by a binary built without it (CORE_ONLY=1), which must then refuse the ilp strategy cleanly.
sp='{"format": "autopar-sharding-problem/1", '
printf '%s"nodes": [{"compute": [1], "communication": [0], "memory_bytes": [0]}]}' "$sp" >"$tmp/one.json"
printf '%s"nodes": [{"compute": [1], "communication": [0], "memory_bytes": [0]}, {"compute": ["x"], "communication": [0], "memory_bytes": [0]}]}' "$sp" >"$tmp/badnode.json"
printf '%s"nodes": [{"compute": [1], "communication": [0], "memory_bytes": [0], "follow": 1}, {"compute": [1], "communication": [0], "memory_bytes": [0], "follow": 0}]}' "$sp" >"$tmp/cycle.json"
printf '%s"nodes": [{"compute": [1, 2], "communication": [0, 0], "memory_bytes": [0, 0]}, {"compute": [1], "communication": [0], "memory_bytes": [0]}], "edges": [{"from": 0, "to": 1, "cost": [[1], [2, 3]]}]}' "$sp" >"$tmp/badedge.json"
printf '%s"nodes": [{"compute": [1, 2], "communication": [0, 0], "memory_bytes": [10, 20]}], "liveness": [[0]], "memory_budget_bytes": 5}' "$sp" >"$tmp/overbudget.json"
printf '{"format": "autopar-stage-problem/1", "n_layers": 1, "n_devices": 2, "n_micro_batches": 1, "n_configs": 1, "submeshes": [[1, 1]], "stage_cost_s": [[[[1]]]]}' >"$tmp/nostage.json"
printf '{"format": "autopar-stage-problem/1", "n_layers": 1, "n_devices": 1, "n_micro_batches": 1, "n_configs": 1, "submeshes": [[1, 1]], "stage_cost_s": [[[[1, 2]]]]}' >"$tmp/badstage.json"
has_ilp=0
"$bin" solve "$tmp/one.json" >/dev/null 2>&1 && has_ilp=1
# Cases marked "N+onnx" read the shipped ONNX models and are skipped by a binary built without the onnx part.
has_onnx=0
"$bin" describe --model examples/onnx/resnet50.onnx >/dev/null 2>&1 && has_onnx=1
# An op-level plan file (autopar-plan/2) for the read-back cases.
[ "$has_onnx" -eq 1 ] && "$bin" plan --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --gbs 64 --strategy greedy --json >"$tmp/gp.json"
# And a pipeline of several stages on submeshes: the default strategies on 4 nodes (issue 12's example).
[ "$has_onnx" -eq 1 ] && "$bin" plan --model examples/onnx/resnet50.onnx --cluster dgx-h100:4x8 --gbs 256 --json >"$tmp/gp3.json"
python3 -c "import json,sys; d=json.load(open('examples/problems/mlp2-4dev.json')); d['nodes'][1]['compute'][3]=1e26; json.dump(d,open(sys.argv[1],'w'))" "$tmp/hugecost.json"
n=0
run_case() {
  want_rc=$1
  args=$2
  text=$3
  n=$((n + 1))
  case "$want_rc" in
  *+ilp)
    want_rc=${want_rc%+ilp}
    if [ "$has_ilp" -eq 0 ]; then
      printf 'ok %d - autopar %s # skipped: no ilp part\n' "$n" "$args"
      return
    fi
    ;;
  *+onnx)
    want_rc=${want_rc%+onnx}
    if [ "$has_onnx" -eq 0 ]; then
      printf 'ok %d - autopar %s # skipped: no onnx part\n' "$n" "$args"
      return
    fi
    ;;
  esac
  # shellcheck disable=SC2086
  out=$(eval "\"$bin\" $args" 2>"$tmp/err")
  rc=$?
  err=$(cat "$tmp/err")
  if [ "$rc" -ne "$want_rc" ]; then
    printf 'not ok %d - autopar %s: exit %d, want %d\n  stdout: %.300s\n  stderr: %.300s\n' "$n" "$args" "$rc" "$want_rc" "$out" "$err"
    return
  fi
  case "$out$err" in
  *"$text"*) ;;
  *)
    printf 'not ok %d - autopar %s: output lacks "%s"\n  stdout: %.300s\n  stderr: %.300s\n' "$n" "$args" "$text" "$out" "$err"
    return
    ;;
  esac
  if [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$err" | grep -c .)" -ne 1 ]; then
    printf 'not ok %d - autopar %s: error is not one line: %s\n' "$n" "$args" "$err"
    return
  fi
  printf 'ok %d - autopar %s\n' "$n" "$args"
}
while IFS='|' read -r rc args text; do
  case "$rc" in '' | '#'*) continue ;; esac
  run_case "$rc" "$args" "$text"
done <<CASES
0|--help|usage: autopar COMMAND
0|--version|autopar 0.1
0|--help|--version
0|--help|mbs 1 x 64
0|estimate --help|autopar-estimate/1
0|describe --model llama-3-8b --json|"format":"autopar-describe/1"
2||missing command
2|frobnicate|unknown command "frobnicate"
0|models|llama-3-70b
0|models --json|"params_total":70553706496
0|describe --model llama-3-70b|70.55B total
0|describe --model llama-3-70b --json|"params_total":70553706496
0|describe --model deepseek-v3 --json|"params_active":37552297472
0|describe --model qwen3-30b-a3b --seq 8192 --json|"seq":8192
0|describe --model ../shared/reference/models/mistralai-Mixtral-8x7B-v0.1.json --json|"params_total":46702792704
0|describe --model tests/data/hf/gpt-neox-20b.json|20554567680
0|describe --help|--seq-length N
0|describe --model llama-3-70b|FLOP/token, all
0|estimate --model gpt2 --cluster h100:8 --gbs 8 --seq 1024 --sp 1 --json|"sequence_parallel":false
0|estimate --model gpt2 --cluster h100:8 --gbs 8 --seq 1024 --sequence-parallel 1 --tp 2|1f1b | sp | recompute
2|describe|--model is required
2|describe --model llama-3-7b|did you mean
2|describe --model $tmp/malformed.json|malformed.json:3:
2|describe --model $tmp/kv.json|num_key_value_heads: must divide num_attention_heads (6), got 4
2|describe --model $tmp/neg.json|hidden_size: expected an integer >= 1, got -64
2|describe --model $tmp/type.json|model_type: unknown model type "rwkv"
2|describe --model /nonexistent.json|cannot open
2|describe --model llama-3-70b --seq 99999999999|--seq (seq_length): expected an integer in [0, 67108864]
2|describe --model llama-3-70b --seq-length -1|--seq-length: expected an integer in [0, 67108864]
2|plan --model gpt2 --cluster h100:8 --gbs 8 --seq 99999999999|option --seq (seq_length): expected an integer in [0, 67108864]
2|plan --model gpt2 --cluster h100:8 --gbs 8 --top 1001|option --top: expected an integer in [1, 1000]
2|compare-search --model examples/onnx/resnet50.onnx --cluster h100-sxm:2 --gbs 0|option --gbs (global_batch_size): expected an integer in [1, 1099511627776]
2|estimate --model gpt2 --cluster h100:8 --mbs 1 --micro-batch-size 2|given twice
0|plan --model gpt2 --cluster h100:8 --global-batch-size 8 --seq-length 512 --top 1 --fix micro-batch-size=1|mbs 1
2|describe --model llama-3-70b --bogus|unknown option --bogus
0|clusters|dgx-h100
0|clusters --show dgx-h100:8x8|"n_devices":64
0|clusters --show h100:64|"n_devices":64
2|clusters --show dgx-h1000|did you mean
0|validate ../shared/reference/runs.csv --json|"mape"
0|validate ../shared/reference/runs.csv|oom agreement
0|validate ../shared/reference/runs.csv --json|"data_floor":{"identical_input_groups"
0|validate --help|FILE.csv
2|validate|expected a CSV file
2|validate /nonexistent/runs.csv|/nonexistent/runs.csv: cannot open
2|validate $tmp/badquote.csv|badquote.csv:2:4: expected ','
2|validate ../shared/reference/runs.csv --bogus|unknown option --bogus
2|validate ../shared/reference/runs.csv --stack megatron|--stack must be one of megatron-lm
0|validate $tmp/small_runs.csv --stack torchtitan|oom agreement
1|plan --model llama-3-8b --cluster dgx-a100-80gb --gbs 64 --seq 1024 --fix zero_stage=0,recompute=none,offload_optimizer=none,tp=1,pp=1,micro_batch_size=2 --top 1|with ZeRO 1 (shard the optimizer states) it would fit
0|estimate --model llama-3-70b --cluster dgx-h100:8x8 --gbs 1024 --seq 8192 --tp 4 --pp 2 --schedule 1f1b --zero 2 --sp 1|allocator reserve
0|export --plan data/plans/llama-3-70b-64xh100.json --format megatron|--tensor-model-parallel-size 8
0|export --plan data/plans/llama-3-70b-64xh100.json --model llama-3-70b --format megatron|--pipeline-model-parallel-size 4
0|export --plan data/plans/llama-3-70b-64xh100.json --format deepspeed|"train_micro_batch_size_per_gpu": 1
0|export --plan data/plans/llama-3-70b-64xh100.json --format torchtitan-toml|[parallelism]
2|export --plan data/plans/llama-3-70b-64xh100.json --format torchtitan|no core-attention recompute
0|plan --model data/models/llama-3-8b.json --cluster h100:8 --gbs 64 --seq 4096 --export json -o $tmp/hf.json >/dev/null && $bin export --plan $tmp/hf.json --format megatron|--rotary-base 500000
0|plan --model data/models/llama-3-8b.json --cluster h100:8 --gbs 64 --seq 4096 --export json -o $tmp/hfr.json >/dev/null && cd / && "$abs_bin" export --plan $tmp/hfr.json --format megatron|--rotary-base 500000
2|plan --model mixtral-8x7b --cluster dgx-h100:4x8 --gbs 256 --seq 4096 --top 1 --export torchtitan -o $tmp/tt.py; test ! -e $tmp/tt.py && exit 2|plan: stack torchtitan: torchtitan has no mixtral-8x7b model
2|plan --model mixtral-8x7b --cluster dgx-h100:4x8 --gbs 256 --seq 4096 --top 1 --stack torchtitan|plan: stack torchtitan: torchtitan has no mixtral-8x7b model
2|plan --model gpt-oss-20b --cluster dgx-h100:4x8 --gbs 256 --seq 4096 --top 1 --export megatron -o $tmp/goss.sh; test ! -e $tmp/goss.sh && exit 2|(the first refused: megatron export: Megatron-LM cannot build gpt-oss-20b as it is: it has learned attention sinks
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --export torchtitan 2>/dev/null|config.parallelism.data_parallel_shard_degree
0|export --plan data/plans/llama-3-70b-64xh100.json --format json|"format":"autopar-plan/1"
0|export --plan data/plans/llama-3-70b-64xh100.json --format megatron -o $tmp/megatron.sh && cat $tmp/megatron.sh|--use-distributed-optimizer
0|export --plan data/plans/llama-3-70b-64xh100.json --format json --output $tmp/rt.json && $bin estimate --plan $tmp/rt.json --model llama-3-70b --cluster h100:64|tokens/s
0|export --help|--format F
2|export --plan data/plans/llama-3-70b-64xh100.json --format bogus|unknown export format "bogus"
2|export --plan data/plans/llama-3-70b-64xh100.json|--plan and --format are required
2|export --plan /nonexistent.json --format json|cannot open
2|export --plan data/plans/llama-3-70b-64xh100.json --model gpt2 --format megatron|tp = 8 must divide num_attention_heads = 12
0|estimate --plan data/plans/llama-3-70b-64xh100.json --model llama-3-70b --cluster h100:64|tokens/s
0|simulate --plan data/plans/llama-3-70b-64xh100.json --model llama-3-70b --cluster h100:64 --trace $tmp/trace.json|simulated
2|calibrate ../shared/reference/runs.csv|expected FILE.csv and -o OUTPUT.json
2|calibrate /nonexistent.csv -o $tmp/cal.json|/nonexistent.csv
2|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --calibration /nonexistent.json|cannot open
0|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --recompute full|tokens/s/device
2|estimate --model llama-3-8b --cluster h100:8 --tp 3 --gbs 64 --seq 4096|must equal
0|simulate --model llama-3-8b --cluster h100:16 --tp 2 --pp 4 --gbs 64 --seq 4096 --trace $tmp/trace.json|simulated
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096|#1  tp
0|estimate --model llama-3-8b --cluster h100:8 --stack llm-foundry --dp 8 --zero 3 --gbs 8 --seq 4096|fused loss
0|estimate --model llama-3-8b --cluster h100:8 --stack llm-foundry --dp 8 --zero 3 --gbs 8 --seq 4096 --fused-loss 0 --json|"fused_loss":false
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --export megatron 2>/dev/null|--cross-entropy-fusion-impl native
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --fix fused_loss=0 --export json -o $tmp/nf.json >/dev/null && python3 -c "import json,sys; print('loss fused', json.load(open(sys.argv[1])).get('fused_loss', False))" $tmp/nf.json|loss fused False
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --top 2 --json|"format":"autopar-search/2"
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --top 2 --json|"tokens_per_s_per_device"
0|plan --model llama-3-70b --cluster h100:64 --gbs 128 --seq 8192 --fix tp=8,pp=4 --top 1|tp 8, pp 4
0|plan --model llama-3-70b --cluster h100:64 --gbs 128 --seq 8192 --objective memory --max-mem-fraction 0.9 --top 1|objective memory
0|plan --model llama-3-70b --cluster h100:64 --gbs 128 --seq 8192 --top 1 --compare data/plans/llama-3-70b-64xh100.json|compare: the given plan against #1
0|plan --model llama-3-70b --cluster h100:64 --gbs 128 --seq 8192 --export megatron 2>/dev/null|--tensor-model-parallel-size
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --export json -o $tmp/best.json >/dev/null && $bin estimate --plan $tmp/best.json --model llama-3-8b --cluster h100:8|tokens/s
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --time-budget 0.5 --calibration data/calibration/default.json|predicted
0|plan --help|--fix tp=8,pp=4
0|estimate --model llama-3-8b --cluster gb300:8 --gbs 64 --seq 4096|constants  B300 not fitted: those of B200, the nearest fitted chip of family Blackwell
0|estimate --model llama-3-8b --cluster mi300x:8 --gbs 64 --seq 4096 --json|"constants":"defaults"
0|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --calibration tests/data/calibration-bands.json|were within -20.0% to +11.1% of the prediction
0|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --calibration tests/data/calibration-bands.json --tokens 1T --price-per-gpu-hour 2|band: 
0|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --calibration tests/data/calibration-bands.json --tokens 1T --json|"time_s_high"
0|estimate --model llama-3-8b --cluster a100-80gb:8 --gbs 64 --seq 2048 --calibration tests/data/calibration-bands.json|constants  GA100 not fitted, nor any chip of family Ampere: those of GH100 (family Hopper), the nearest fitted chip of vendor nvidia
0|estimate --model llama-3-8b --cluster mi300x:8 --gbs 64 --seq 2048 --calibration tests/data/calibration-bands.json|constants  MI300X not fitted, nor any chip of family CDNA3 or vendor amd: the documented defaults
0|plan --model llama-3-8b --cluster a100-40gb:8 --gbs 64 --seq 2048 --top 1|constants GA100 fitted
1|plan --model llama-3-70b --cluster h100:8 --gbs 64 --seq 4096 --fix offload_optimizer=none,offload_param=none|closest plans
1|plan --model llama-3-70b --cluster h100:8 --gbs 64 --seq 4096 --json --fix offload_optimizer=none,offload_param=none|"feasible":false
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --fix tpp=2|unknown plan field "tpp"
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --fix tp=3|no valid plan meets the fixed fields
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --fix gbs=32|gbs is part of the problem
2|plan --model llama-3-8b --cluster h100:8|--model, --cluster and --global-batch-size (--gbs) are required
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --objective fast|--objective must be throughput or memory
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --max-mem-fraction x|--max-mem-fraction: expected a number
0|plan --model llama-3-8b --cluster dgx-a100-40gb:2x8 --gbs 256 --seq 4096 --top 1 --max-mem-fraction 0.7 --json > $tmp/mf.json && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('within', d['plans'][0]['memory']['peak_bytes'] <= 0.7 * 40 * 2**30, d['mem_limit_bytes'] == 0.7 * 40 * 2**30, d['plans'][0]['memory']['reserve_fraction'] > 0)" $tmp/mf.json|within True True True
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --stack megatron|--stack must be one of megatron-lm
2|plan --model llama-3-8b --cluster dgx-h100:2x8 --gbs 64 --fix pp=2,schedule=zb-v,vpp=2|megatron-lm does not run the zb-v schedule
0|plan --model llama-3-8b --cluster dgx-h100:2x8 --gbs 64 --fix pp=2,schedule=zb-v,vpp=2 --stack any --top 1|zb-v
0|plan --model llama-3-8b --cluster dgx-h100:8x8 --gbs 64 --stack megatron-deepspeed --json --top 1|"stack":"megatron-deepspeed"
0|estimate --model llama-3-8b --cluster h100:8 --tp 2 --dp 4 --stack torchtitan --json|"stack":"torchtitan"
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --export bogus|unknown export format "bogus"
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --top 1|stack: megatron-lm (the default; --stack NAME for another)
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --top 1 --export torchtitan 2>&1 >/dev/null|stack: torchtitan (from --export torchtitan; --stack NAME for another)
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096 --top 1 --stack deepspeed --json|"stack_source":"--stack"
0|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --seq 4096|stack    megatron-lm (the default; --stack NAME for another)
2|plan --model llama-3-70b --cluster dgx-h100:8x8 --gbs 1024 --seq 8192 --fix pp=4,vpp=2,schedule=interleaved-1f1b --export deepspeed|--fix schedule=interleaved-1f1b: deepspeed does not run the interleaved-1f1b schedule (stack deepspeed, from --export deepspeed)
2|plan --model llama-3-70b --cluster dgx-h100:8x8 --gbs 1024 --seq 8192 --fix recompute_layers=2 --stack torchtitan|--fix recompute_layers=2: torchtitan recomputes every layer of a chunk or none
2|plan --model llama-3-70b --cluster dgx-h100:1x8 --gbs 64 --seq 4096 --top 1 --fix cp=2 --export json -o $tmp/cp.json >/dev/null && $bin export --plan $tmp/cp.json --format deepspeed|DeepSpeed has no context parallelism (its Ulysses sequence parallelism splits attention heads, not the sequence ring); for a plan deepspeed runs: autopar plan --model llama-3-70b --cluster dgx-h100:1x8 --gbs 64 --seq 4096 --stack deepspeed --export deepspeed
0|plan --model llama-3-70b --cluster dgx-h100:1x8 --gbs 64 --seq 4096 --top 1 --export torchtitan-toml 2>/dev/null|torchtitan v0.2.x job config
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 -o $tmp/x.sh|-o/--output needs --export FORMAT
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --export megatron -o $tmp/nodir/x.sh > $tmp/nodir.out; test -s $tmp/nodir.out && exit 3; exit 2|nodir/x.sh: cannot write: No such file or directory
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --report $tmp/nodir/r.html > $tmp/nodir.out; test -s $tmp/nodir.out && exit 3; exit 2|nodir/r.html: cannot write: No such file or directory
0|validate $tmp/small_runs.csv --search|search: the planner's best is at least as fast as the row's plan on 2 of 2
0|validate $tmp/named_runs.csv --json|"note":"architecture of the built-in preset data/models/gpt-oss-120b.json
0|validate $tmp/small_runs.csv --search --json|"best_predicted_tokens_per_s_per_gpu"
0|validate $tmp/small_runs.csv --search --json|"best_plan":{"format":"autopar-plan/1"
0+ilp|solve examples/problems/mlp2-4dev.json|ilp: optimal, objective 8.5, lower bound 8.5
0+ilp|solve examples/problems/mlp2-4dev.json --json|"status": "optimal", "objective": 8.5, "lower_bound": 8.5
1+ilp|solve $tmp/overbudget.json --json|"status": "infeasible", "objective": null
1+ilp|solve $tmp/overbudget.json|the problem has no feasible choice
0|solve examples/problems/pipeline-4layer.json|inter-op: optimal, objective 9.45; 2 stages
0|solve examples/problems/pipeline-4layer.json --json|"stages": [{"first_layer": 0, "last_layer": 1, "submesh": 1, "config": 0}
1|solve $tmp/nostage.json|no sequence of stages covers the layers on exactly 2 devices
0|solve examples/problems/mlp2-4dev.json --strategy mcmc --seed 3|mcmc: feasible, objective 8.5
0|solve examples/problems/mlp2-4dev.json --strategy mcts --evals 500|mcts: feasible, objective 8.5
0|solve examples/problems/mlp2-4dev.json --strategy rl --time-budget 0.5|rl: feasible, objective 8.5
0|solve examples/problems/mlp2-4dev.json --strategy recursive --json|"strategy": "recursive", "status": "feasible"
0|solve examples/problems/mlp2-4dev.json --strategy greedy --annotate '1=0'|greedy: feasible, objective 15.3; choice 0 0 0 2
2|solve examples/problems/mlp2-4dev.json --strategy greedy --annotate '1=7'|--annotate: "1=7": node 1 has 4 strategies
2|solve examples/problems/mlp2-4dev.json --strategy elim-dp|elim-dp cannot take a memory budget
0|solve $tmp/one.json --strategy elim-dp --json|"status": "optimal", "objective": 1, "lower_bound": 1
2|solve examples/problems/mlp2-4dev.json --strategy inter-op|solves stage problems
2|solve examples/problems/pipeline-4layer.json --strategy mcmc|is a stage problem (use inter-op)
2|solve examples/problems/mlp2-4dev.json --strategy mcmx|unknown strategy "mcmx" (did you mean mcmc
2|solve $tmp/badnode.json|badnode.json: nodes[1].compute[0]: must be a number in [0, 1e18] or null
2|solve $tmp/cycle.json|cycle.json: nodes[0].follow: the chain of follows from this node is a cycle
2|solve $tmp/badedge.json|badedge.json: edges[0].cost[1]: must be an array of 1 entries
2|solve $tmp/badstage.json|badstage.json: stage_cost_s[0][0][0]: must be an array of 1 entries (one per config)
2|solve $tmp/malformed.json|malformed.json:3:
2|solve $tmp/kv.json|kv.json: format: expected "autopar-sharding-problem/1" or "autopar-stage-problem/1"
2|solve /nonexistent/p.json|/nonexistent/p.json
2|solve|expected one problem file
2|solve examples/problems/mlp2-4dev.json --time-budget soon|--time-budget: expected a number of seconds > 0
0|solve --help|elim-dp
0|compare-clusters --model llama-3-8b --clusters h100:8,a100-80gb:16 --gbs 64 --seq 4096 --tokens 1T --price-per-gpu-hour 2.5,1.5|by cost: 1.
0|compare-clusters --model llama-3-8b --clusters h100:8,a100-80gb:16 --gbs 64 --seq 4096 --json|"format":"autopar-compare-clusters/1"
0|compare-clusters --model llama-3-70b --clusters h100:8,dgx-h100:4x8 --gbs 256 --seq 4096 --fix offload_optimizer=none,offload_param=none|no plan fits
2|compare-clusters --model llama-3-8b --clusters h100:8,,a100:8 --gbs 64|--clusters: expected a comma-separated list
2|compare-clusters --model llama-3-8b --clusters h100:8,a100:8 --gbs 64 --price-per-gpu-hour 1,2,3|expected one price or one per cluster
2|compare-clusters --model llama-3-8b --clusters h100:8,zz:8 --gbs 64|--clusters: zz:8:
2|compare-clusters --model llama-3-8b --clusters h100:8 --gbs 64 --tokens lots|--tokens: expected a positive amount
2|compare-clusters --model llama-3-8b --clusters h100:8|are required
2|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --tokens lots|--tokens: expected a positive amount
2|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --price-per-gpu-hour 2|--price-per-gpu-hour needs --tokens
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --tokens 1T --price-per-gpu-hour free|--price-per-gpu-hour: expected a positive number
0|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --tokens 1T --price-per-gpu-hour 2|device-hours, cost
0|plan --model llama-3-8b --cluster h100:8 --gbs 64 --tokens 300B --json|"train":{"tokens":300000000000,
1|plan --model llama-3-70b --cluster h100:8 --gbs 64 --tokens 1T --fix offload_optimizer=none,offload_param=none|time to train: none (no plan fits)
2|simulate --model llama-3-8b --cluster h100:8 --gbs 8 --report $tmp/r.html|--report needs --trace
2|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --report /nonexistent/dir/r.html|/nonexistent/dir/r.html
0|validate tests/data/runs_small.csv --quiet|MAPE
0|plan --model llama-3-70b --cluster h100:8 --gbs 64 --seq 4096|offload optimizer cpu
1|plan --model llama-3-70b --cluster h100:8 --gbs 64 --seq 4096 --fix offload_optimizer=none|no plan fits
0|plan --model llama-3-70b --cluster h100:8 --gbs 64 --seq 4096 --export deepspeed|"device": "cpu"
2|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --offload-param cpu|offload_param cpu needs zero_stage 3
2|estimate --model llama-3-8b --cluster h100:8 --gbs 64 --zero 1 --offload-optimizer nvme|offload_optimizer nvme needs zero_stage 3
2|estimate --model llama-3-8b --cluster mi300x:8 --gbs 64 --zero 1 --offload-optimizer cpu|offload needs the host side of mi300x
2|export --plan tests/data/plan_offload_70b.json --format megatron|Megatron-LM has no parameter offload
2|export --plan tests/data/plan_offload_70b.json --format torchtitan|torchtitan offloads parameters
0|estimate --model llama-3.1-405b --cluster h100:8 --gbs 8 --seq 4096 --tp 8 --zero 3 --offload-optimizer cpu --offload-param cpu --recompute full|host memory per node for offload: 6804.1 GiB of 2048.0: DOES NOT FIT
0+onnx|plan --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --gbs 64 --strategy greedy|op-level sharding
0+onnx|plan --model examples/onnx/vit_b_16.onnx --cluster dgx-h100:4x8 --gbs 64 --strategy greedy --json|"format": "autopar-plan/2"
0+onnx|plan --model examples/onnx/unet.onnx --cluster dgx-h100:4x8 --gbs 64 --strategy greedy --json|"format": "autopar-plan/2"
0+onnx|plan --model examples/onnx/gpt2_small.onnx --cluster dgx-h100:4x8 --gbs 64 --strategy greedy --json|"format": "autopar-plan/2"
0+onnx|plan --model examples/onnx/t5_small.onnx --cluster dgx-h100:4x8 --gbs 64 --strategy greedy --json|"format": "autopar-plan/2"
0+onnx|plan --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --gbs 64 --strategy greedy --json|"format": "autopar-plan/2"
0+onnx|plan --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --gbs 64 --strategy greedy --annotate /conv1/Conv=R,S0,R,R --json|"name": "/conv1/Conv", "op_type": "Conv", "output_spec": ["R", "S0", "R", "R"]
2+onnx|plan --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --gbs 64 --annotate nosuch=S0,R|--annotate: the model has no op named "nosuch"
2+onnx|plan --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --gbs 64 --annotate /conv1/Conv=S0|--annotate: op /conv1/Conv: "S0" is not a spec of its output's 4 dims
2+onnx|plan --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --gbs 64 --annotate /conv1/Conv=R,R,S0,R|op /conv1/Conv: no legal strategy gives its output the spec R,R,S0,R
2+onnx|plan --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --gbs 64 --strategy inter-op|inter-op needs a sharding strategy for its stages
2|plan --model llama-3-8b --cluster h100:8 --gbs 64 --annotate fc1=S0,R|--annotate applies to general graphs
0+onnx|describe --model examples/onnx/resnet50.onnx --sharding --cluster dgx-h100:2x8|sharding strategies of resnet50 on a mesh of 2 (network) x 8 (nvlink)
0+onnx|compare-search --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --time-budget 0.5 --evals 2000|baseline: megatron
0+onnx|estimate --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --plan $tmp/gp.json|predicted
0+onnx|estimate --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --plan $tmp/gp.json --json|"format": "autopar-graph-estimate/1"
0+onnx|simulate --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --plan $tmp/gp.json|simulated
0+onnx|export --plan $tmp/gp.json --model examples/onnx/resnet50.onnx --format json|"format": "autopar-plan/2"
0+onnx|export --plan $tmp/gp.json --format json -o $tmp/gpx.json && (cd / && "$abs_bin" export --plan $tmp/gpx.json --format json -o $tmp/gpx2.json) && cmp $tmp/gpx.json $tmp/gpx2.json && cmp $tmp/gp.json $tmp/gpx.json && echo same-bytes|same-bytes
2+onnx|export --plan $tmp/gp.json --format json -o $tmp/gpn.json >/dev/null && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('model_path'); json.dump(d, open(sys.argv[1], 'w'))" $tmp/gpn.json && "$bin" export --plan $tmp/gpn.json --format json -o $tmp/gpn2.json; test ! -e $tmp/gpn2.json && exit 2|records no model_path: name the model with --model
2+onnx|export --plan $tmp/gp.json --format json -o $tmp/gpm.json >/dev/null && python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['model_path']='/nonexistent/net.onnx'; json.dump(d, open(sys.argv[1], 'w'))" $tmp/gpm.json && "$bin" export --plan $tmp/gpm.json --format json|gpm.json: model_path: "/nonexistent/net.onnx" does not load
2+onnx|export --plan $tmp/gp.json --model examples/onnx/resnet50.onnx --format megatron|exports as json only, not megatron
2+onnx|estimate --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --plan $tmp/gp.json --tp 2|takes only --model, --cluster, --plan, --json, --calibration, --report
2+onnx|simulate --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --plan $tmp/gp.json --tp 2|takes only --model, --cluster, --plan, --json, --calibration, --report, --trace and --max-events
2+onnx|estimate --model examples/onnx/gpt2_small.onnx --cluster h100-sxm:8 --plan $tmp/gp.json|gp.json: stages[0].first_op: "/conv1/Conv": the one stage must start at the graph's first op, /wte/Gather
2+onnx|estimate --model examples/onnx/resnet50.onnx --cluster dgx-h100:2x8 --plan $tmp/gp.json|gp.json: mesh.shape: covers 8 devices; the cluster dgx-h100:2x8 has 16
0+onnx|estimate --model examples/onnx/resnet50.onnx --cluster dgx-h100:4x8 --plan $tmp/gp3.json|s per iteration (pipeline latency)
0+onnx|estimate --model examples/onnx/resnet50.onnx --cluster dgx-h100:4x8 --plan $tmp/gp3.json --json|"stages": [{"first_op": "/conv1/Conv"
0+onnx|export --plan $tmp/gp3.json --model examples/onnx/resnet50.onnx --format json -o $tmp/gp3b.json && cmp $tmp/gp3.json $tmp/gp3b.json && echo same-bytes|same-bytes
0+onnx|simulate --model examples/onnx/resnet50.onnx --cluster dgx-h100:4x8 --plan $tmp/gp3.json|stage 1: simulated
0+onnx|simulate --model examples/onnx/resnet50.onnx --cluster dgx-h100:4x8 --plan $tmp/gp3.json --trace $tmp/gt.json|timeline written to
0+onnx|simulate --model examples/onnx/resnet50.onnx --cluster dgx-h100:4x8 --plan $tmp/gp3.json --trace $tmp/gt.json && python3 -c "import json; d=json.load(open('$tmp/gt.json')); e=d['traceEvents']; print('trace', d['otherData']['schedule'], {x['cat'] for x in e if x['ph'] == 'X'} >= {'F', 'B', 'send'}, any(x['args']['name'].startswith('link 0-1') for x in e if x['ph'] == 'M'))"|trace 1f1b True True
2+onnx|simulate --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --plan $tmp/gp.json --trace $tmp/gt1.json --max-events 1|the pipeline has 2 passes (1 stages x 1 micro-batches x 2), more than the limit of 1; raise it with --max-events
2+onnx|simulate --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --plan $tmp/gp.json --trace $tmp/no/t.json|cannot write
0+onnx|simulate --model examples/onnx/resnet50.onnx --cluster h100-sxm:8 --plan $tmp/gp.json --trace $tmp/gt1.json --max-events 1; test ! -e $tmp/gt1.json && echo no-partial-trace|no-partial-trace
2+onnx|estimate --model examples/onnx/resnet50.onnx --cluster dgx-h100:2x8 --plan $tmp/gp3.json|gp3.json: stages
2+onnx|estimate --model llama-3-8b --cluster h100-sxm:8 --plan $tmp/gp.json|gp.json: stages[0].first_op
2|compare-search --model llama-3-8b|--model and --cluster are required
2|compare-search --model llama-3-8b --cluster h100:8 --time-budget never|--time-budget: expected a number of seconds > 0
2|solve $tmp/hugecost.json|hugecost.json: nodes[1].compute[3]: must be a number in [0, 1e18] or null
CASES
# The answer documents (docs/json.md): every --json output parses and carries its format tag, the text output's
# key figures equal the document's, and numbers are written at full precision (tests/cli_json.py).
python3 tests/cli_json.py "$bin" "$tmp" | sed 's/^\(\(not \)\{0,1\}ok\) [0-9]* - /\1 json - /'
