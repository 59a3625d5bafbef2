#!/bin/sh
# expect-status.sh -- run a command and succeed only if it exits with exactly STATUS.
# usage: expect-status.sh STATUS -- CMD [ARG...]
if [ $# -lt 3 ] || [ "$2" != "--" ]; then
    echo "usage: $0 STATUS -- CMD [ARG...]" >&2
    exit 2
fi
want=$1
shift 2
"$@"
got=$?
if [ "$got" -ne "$want" ]; then
    echo "expect-status: '$*' exited $got, expected $want" >&2
    exit 1
fi
echo "expect-status: exited $got as expected" >&2
exit 0
