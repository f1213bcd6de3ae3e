# bash completion for autopar. It asks the binary itself for its commands (`autopar --help`) and each
# command's options and their aliases (`autopar COMMAND --help`, whose plan-field lines the binary writes from
# the field table), so it never lags behind the options the binary takes.
# Installed by `make install` into $(PREFIX)/share/bash-completion/completions/autopar.
_autopar() {
  local cur prev cmd opts
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    cmds=$("${COMP_WORDS[0]}" --help 2>/dev/null | sed -n '/^commands:/,/^$/s/^  \([a-z-]*\) .*/\1/p')
    COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
    return 0
  fi
  cmd=${COMP_WORDS[1]}
  case "$prev" in
  --model) COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" models 2>/dev/null | awk 'NR > 1 {print $1}')" -- "$cur") $(compgen -f -- "$cur")); return 0 ;;
  --cluster | --show) COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" clusters 2>/dev/null | awk '/^  [a-z0-9]/ && $1 != "name" {print $1}')" -- "$cur") $(compgen -f -- "$cur")); return 0 ;;
  # The export formats: the values after "one of:" on the --format/--export line of the command's help (the
  # export module's table).
  --format | --export) COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null | sed -n "s/^  $prev .*one of: //p" | tr -d ,)" -- "$cur")); return 0 ;;
  --strategy) COMPREPLY=($(compgen -W "grid stage-dp layer-dp hetero ilp inter-op elim-dp greedy mcmc mcts rl recursive" -- "$cur")); return 0 ;;
  --plan | --calibration | --compare | --trace | --output | -o | --report | --init | --data | --save | --record) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
  esac
  if [[ "$cur" == -* ]]; then
    # Each option line: "  --name VALUE  help (also --alias, --alias2)"; the aliases (a plan field's other
    # spellings in the field table, src/plan/plan_fields.c) are offered too.
    opts=$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null | sed -n -e 's/^  \(--[a-z0-9-]*\).*(also \(--[^)]*\))$/\1 \2/p' -e 't' -e 's/^  \(--[a-z0-9-]*\).*/\1/p' | tr -d ,)
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}
complete -F _autopar autopar
