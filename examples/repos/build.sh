#!/usr/bin/env bash
# Builds the example repositories from examples/repos/src/<name>/ with a fixed history
# (fixed author, committer, dates, no signing), so their commit hashes are reproducible,
# and writes examples/repos/<name>.bundle. Idempotent: a bundle is only rewritten when
# its refs change. Prints the head commit of each bundle.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# No user or system configuration, no hooks, no templates.
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME="Ada Example" GIT_AUTHOR_EMAIL="ada@example.invalid"
export GIT_COMMITTER_NAME="Ada Example" GIT_COMMITTER_EMAIL="ada@example.invalid"
export TZ=UTC LC_ALL=C
G=(git -c user.name="Ada Example" -c user.email="ada@example.invalid"
   -c commit.gpgsign=false -c tag.gpgsign=false -c core.autocrlf=false
   -c core.filemode=true -c init.defaultBranch=main -c pack.threads=1)

# commit <repo dir> <date> <message> <paths...>: stages the paths (copied from src) and commits.
commit() {
    local dir=$1 date=$2 msg=$3
    shift 3
    local name; name=$(basename "$dir")
    for p in "$@"; do
        mkdir -p "$dir/$(dirname "$p")"
        cp -R "$here/src/$name/$p" "$dir/$(dirname "$p")/"
    done
    "${G[@]}" -C "$dir" add -A -- "$@"
    GIT_AUTHOR_DATE="$date" GIT_COMMITTER_DATE="$date" \
        "${G[@]}" -C "$dir" commit -q --no-verify -m "$msg"
}

# build <name> <stage>...: each stage is "date|message|path path ...".
build() {
    local name=$1
    shift
    local dir="$work/$name"
    mkdir -p "$dir"
    "${G[@]}" init -q -b main --template= "$dir"
    "${G[@]}" -C "$dir" config core.autocrlf false
    local stage date msg paths
    for stage in "$@"; do
        IFS='|' read -r date msg paths <<<"$stage"
        # shellcheck disable=SC2086
        commit "$dir" "$date" "$msg" $paths
    done
    # Every file of the source tree must be in the history (ignored files aside).
    local missing
    missing=$(cd "$here/src/$name" && find . -type f ! -path '*/target/*' ! -path '*/__pycache__/*' ! -name '*.pyc' | sed 's|^\./||' | sort | while read -r f; do
        [ -e "$dir/$f" ] || echo "$f"; done)
    if [ -n "$missing" ]; then
        echo "build.sh: $name: files not in any stage: $missing" >&2
        exit 1
    fi
    local out="$here/$name.bundle" new="$work/$name.bundle"
    "${G[@]}" -C "$dir" bundle create -q "$new" --all 2>/dev/null ||
        "${G[@]}" -C "$dir" bundle create "$new" --all
    if [ -f "$out" ] && [ "$(git bundle list-heads "$out")" = "$(git bundle list-heads "$new")" ]; then
        :   # unchanged: keep the committed file byte for byte
    else
        cp "$new" "$out"
    fi
    echo "$name $("${G[@]}" -C "$dir" rev-parse HEAD) $(basename "$out")"
}

build wordcount \
    "2024-03-01T09:00:00+00:00|Project skeleton: manifest, README, ignore rules|.gitignore Cargo.toml Cargo.lock README.md" \
    "2024-03-02T10:30:00+00:00|Add counts, frequencies, wrapping and truncation|src" \
    "2024-03-04T16:45:00+00:00|Add integration tests|tests"

build pyslug \
    "2024-04-10T08:15:00+00:00|Project skeleton: pyproject, README, ignore rules|.gitignore pyproject.toml README.md" \
    "2024-04-11T14:00:00+00:00|Add slugify, unique slugs and case conversion|pyslug" \
    "2024-04-12T11:20:00+00:00|Add unit tests|tests"
