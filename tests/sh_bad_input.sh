#!/bin/sh
# The bad-input catalogue (issue 9; a shell test of tests/run.sh): one case per line of tests/bad_input.txt, "EXIT|ARGS|WORDS|ABSENT":
# run `autopar ARGS` (with $T the scratch folder of fixtures made below) under a 20 s limit, and expect exit
# status EXIT, every word of WORDS (separated by ';') in its output, a one-line error when EXIT is 2, no
# crash, no hang, and none of the paths of ABSENT (separated by spaces) existing afterwards: no partial
# output. Prints "ok"/"not ok" per case. Usage: tests/sh_bad_input.sh [BIN].
bin=${1:-bin/autopar}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export T
# Fixtures: special files, hostile paths and numbers at the edges.
mkdir "$T/dir" "$T/models"
mkfifo "$T/fifo"
: >"$T/empty.json"
printf '\001\002\377garbage' >"$T/nul.json"
cp data/plans/llama-3-70b-64xh100.json "$T/p.json"
cp data/calibration/default.json "$T/cal_in.json"
cp data/models/gpt2.json "$T/gpt2copy.json" 2>/dev/null || printf '{"model_type":"gpt2","n_embd":768,"n_layer":12,"n_head":12,"vocab_size":50257}' >"$T/gpt2copy.json"
hf() { printf '{"model_type":"%s","hidden_size":%s,"num_hidden_layers":%s,"num_attention_heads":%s,"vocab_size":100%s}' "$@"; }
hf llama 9223372036854775807 2 4 "" >"$T/big_hidden.json"
hf falcon 9223372036854775807 2 4 "" >"$T/big_falcon.json"
hf llama 64 2 4 ',"intermediate_size":1099511627776' >"$T/big_ffn.json"
hf llama 64 100000 4 "" >"$T/big_layers.json"
hf llama 64 2 -4 "" >"$T/neg_heads.json"
# Huge reals in integer fields (issue 19, class 9): "out of range", never "a fraction".
hf llama 1e308 2 4 "" >"$T/huge_hidden.json"
hf llama 1e16 2 4 "" >"$T/huge16_hidden.json"
hf llama 64.5 2 4 "" >"$T/frac_hidden.json"
sed 's/"global_batch_size": *[0-9]*/"global_batch_size": 1e308/' data/plans/llama-3-70b-64xh100.json >"$T/huge_gbs.json"
sed 's/\["B",784\]/["B",1e308]/' fuzz/seeds/graph/mlp-3-min.json >"$T/huge_dim.json"
sed 's/"n_micro_batches": 8/"n_micro_batches": 1e308/' examples/problems/pipeline-4layer.json >"$T/huge_mb.json"
sed 's/"devices_per_node": 8/"devices_per_node": 1e308/' data/clusters/dgx-h100.json >"$T/huge_dpn.json"
hf deepseek_v3 64 2 4 ',"kv_lora_rank":16,"qk_nope_head_dim":9223372036854775807,"qk_rope_head_dim":9223372036854775807,"v_head_dim":16,"n_routed_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32' >"$T/mla_big.json"
printf '{"format":"autopar-plan/1","model":"gpt2","global_batch_size":1,"seq_length":1024,"parallel":{"dp":8,"tp":1,"pp":1,"cp":1},"pipeline":{"micro_batch_size":4294967296,"n_micro_batches":4294967296}}' >"$T/sat.json"
printf '{"format":"autopar-plan/1","model":"gpt2","global_batch_size":8,"seq_length":1024,"parallel":{"dp":1,"tp":8,"pp":1,"cp":1},"pipeline":{"micro_batch_size":1,"n_micro_batches":8}}' >"$T/badtp.json"
head='id,model,model_config,gpu,num_gpus,global_batch_size,seq_length,micro_batch_size,tp,pp,dp,precision,outcome,measured_tokens_per_s_per_gpu'
printf '%s\na,gpt2,gpt2.json,a100-80gb,8,64,1024,1,1,1,8,bf16,ok,10000\n' "$head" >"$T/runs.csv"
sed 's|"model_path": "[^"]*"|"model_path": 7|' fuzz/seeds/plan2/mlp3-h100x8-model-path.json >"$T/gp_badpath.json"
cp "$T/gpt2copy.json" "$T/models/gpt2.json"
printf '%s\na,gpt2,../../../../etc/passwd,a100-80gb,8,64,1024,1,1,1,8,bf16,ok,10000\n' "$head" >"$T/dotdot.csv"
printf '%s\na,gpt2,/etc/passwd,a100-80gb,8,64,1024,1,1,1,8,bf16,ok,10000\n' "$head" >"$T/abs.csv"
ln -s /etc/hostname "$T/models/escape.json"
# Special targets are reached through links in $T, so that a binary that replaced its target (as before
# issue 9's fix) damages only the link, never /dev/null or /dev/stdout themselves.
ln -s /dev/null "$T/null"
ln -s /proc/self/fd/1 "$T/stdout"
printf '%s\na,gpt2,escape.json,a100-80gb,8,64,1024,1,1,1,8,bf16,ok,10000\n' "$head" >"$T/link.csv"
n=0
while IFS='|' read -r want args words absent; do
  case "$want" in '' | '#'*) continue ;; esac
  n=$((n + 1))
  # shellcheck disable=SC2086
  out=$(eval "timeout 20 \"$bin\" $args" 2>"$T/.err")
  rc=$?
  err=$(cat "$T/.err")
  why=""
  if [ "$rc" -ne "$want" ]; then why="exit $rc, want $want"; fi
  if [ -z "$why" ] && [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$err" | grep -c .)" -ne 1 ]; then why="error is not one line"; fi
  if [ -z "$why" ]; then
    rest=$words
    while [ -n "$rest" ]; do
      w=${rest%%;*}
      [ "$w" = "$rest" ] && rest="" || rest=${rest#*;}
      case "$out$err" in *"$w"*) ;; *) why="output lacks \"$w\"" ;; esac
    done
  fi
  for f in $(eval "echo $absent"); do
    [ -e "$f" ] && why="$f exists afterwards"
  done
  [ -L "$T/null" ] && [ -L "$T/stdout" ] || why="a special target's link was replaced"
  if [ -n "$why" ]; then
    printf 'not ok %d - autopar %s: %s\n  stdout: %.200s\n  stderr: %.300s\n' "$n" "$args" "$why" "$out" "$err"
  else
    printf 'ok %d - autopar %s\n' "$n" "$args"
  fi
done <tests/bad_input.txt
