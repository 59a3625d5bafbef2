# lockstep.bash -- bash completion for lockstep: its commands, each command's options, files
# and folders for PATH arguments. Installed as share/bash-completion/completions/lockstep.
# A command's options, and what each one's value is, come from the lockstep being completed
# (`lockstep --list-options COMMAND`, made from the command's table of options): nothing here
# names an option of a command.

# The formats of --format NAME[=FILE], as the lockstep being completed lists them (its help
# prints the table in analyzer/report/output.c).
_lockstep_formats() {
    "$1" help analyze 2>/dev/null | sed -n 's/^ *formats: //p' | tr -d ,
}

# Each option of a command on a line, "--NAME VALUE [WORD...]" ("--NAME" for a flag; "-L VALUE"
# for a short form; the WORDs its value may be, when the command's table names them).
_lockstep_options() {
    "$1" --list-options "$2" 2>/dev/null
}

# The commands, as the lockstep being completed lists them (its table in lockstep.c).
_lockstep_commands() {
    "$1" --list-commands 2>/dev/null
}

_lockstep() {
    local cur prev cmd i
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
    local commands
    commands="$(_lockstep_commands "${COMP_WORDS[0]}" | tr '\n' ' ')help"

    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return
    fi
    cmd=${COMP_WORDS[1]}
    if [[ $cmd == help ]]; then
        [[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W "${commands%help}" -- "$cur"))
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
    # The value of an option: one of the words its row names, else by its name in the help: a
    # folder, a file, a format.
    if [[ $prev == -* ]]; then
        local value words
        read -r value words < <(_lockstep_options "${COMP_WORDS[0]}" "$cmd" | sed -n "s/^$prev //p")
        if [[ -n $words ]]; then
            COMPREPLY=($(compgen -W "$words" -- "$cur"))
            return
        fi
        case $value in
        '') ;;
        *DIR)
            COMPREPLY=($(compgen -d -- "$cur"))
            return
            ;;
        *FILE | *.json | *.html)
            COMPREPLY=($(compgen -f -- "$cur"))
            return
            ;;
        'NAME[=FILE]')
            COMPREPLY=($(compgen -W "$(_lockstep_formats "${COMP_WORDS[0]}")" -- "$cur"))
            return
            ;;
        *) return ;;
        esac
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_lockstep_options "${COMP_WORDS[0]}" "$cmd" |
            awk '$1 ~ /^--/ { print $1 }')" -- "$cur"))
        return
    fi
    case $cmd in
    watch) COMPREPLY=($(compgen -d -- "$cur")) ;;
    run) COMPREPLY=($(compgen -W "--" -- "$cur")) ;;
    *) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
}

complete -o filenames -F _lockstep lockstep
