#!/bin/bash
# Reference solution: find -print0 and quoted paths, parent folders made first.
set -euo pipefail
cat > /app/backup.sh <<'SH'
#!/bin/bash
# backup.sh SRC DEST: copies every *.txt file under SRC into DEST, keeping the folders
# they are in (SRC/a/b.txt -> DEST/a/b.txt).
set -euo pipefail
SRC=${1%/}
DEST=${2%/}
while IFS= read -r -d '' f; do
    rel=${f#"$SRC"/}
    mkdir -p "$DEST/$(dirname "$rel")"
    cp -- "$f" "$DEST/$rel"
done < <(find "$SRC" -type f -name '*.txt' -print0)
SH
