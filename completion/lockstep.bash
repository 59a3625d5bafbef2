# lockstep.bash -- bash completion for lockstep: its commands, each command's options, files
# and folders for PATH arguments. Installed as share/bash-completion/completions/lockstep.
# The options are those of `lockstep help COMMAND` (tests/cli checks that they agree).

# The formats of --format NAME[=FILE], as the lockstep being completed lists them (its help
# prints the table in analyzer/output.c).
_lockstep_formats() {
    "$1" help analyze 2>/dev/null | sed -n 's/^ *formats: //p' | tr -d ,
}

_lockstep_options() {
    case $1 in
    run) echo "--dir --stall --format --json --log --ranks --grace --signal-stacks --help" ;;
    watch) echo "--stall --format --json --log --ranks --kill --keep --metrics --status --grace --signal-stacks --help" ;;
    analyze) echo "--format --json --html --job --ranks --help" ;;
    stacks) echo "--json --help" ;;
    dump) echo "--help" ;;
    export) echo "--perfetto --format --job --help" ;;
    summarize) echo "--output --per-host --help" ;;
    esac
}

_lockstep() {
    local cur prev cmd i
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    local commands="run watch analyze stacks dump export summarize help"

    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi
    cmd=${COMP_WORDS[1]}
    if [[ $cmd == help ]]; then
        [[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W "${commands% help}" -- "$cur"))
        return
    fi
    # run: after '--' the rest is the job's own command line.
    if [[ $cmd == run ]]; then
        for ((i = 2; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} == -- ]]; then
                if [[ $i -eq $((COMP_CWORD - 1)) ]]; then
                    COMPREPLY=($(compgen -c -- "$cur"))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
                return
            fi
        done
    fi
    case $prev in
    --dir | --per-host)
        COMPREPLY=($(compgen -d -- "$cur"))
        return
        ;;
    --json | --log | --html | --perfetto | --output | -o | --metrics | --status)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    --format)
        COMPREPLY=($(compgen -W "$(_lockstep_formats "${COMP_WORDS[0]}")" -- "$cur"))
        return
        ;;
    --ranks)
        COMPREPLY=($(compgen -W "named all" -- "$cur"))
        return
        ;;
    --stall | --grace | --job)
        return
        ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_lockstep_options "$cmd")" -- "$cur"))
        return
    fi
    case $cmd in
    watch) COMPREPLY=($(compgen -d -- "$cur")) ;;
    run) COMPREPLY=($(compgen -W "--" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
}

complete -o filenames -F _lockstep lockstep
