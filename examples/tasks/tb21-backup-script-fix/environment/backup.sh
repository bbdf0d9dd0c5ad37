#!/bin/bash
# backup.sh SRC DEST: copies every *.txt file under SRC into DEST, keeping the folders
# they are in (SRC/a/b.txt -> DEST/a/b.txt).
set -e
SRC=$1
DEST=$2
for f in $(find $SRC -name *.txt); do
    rel=${f#$SRC/}
    cp $f $DEST/$rel
done
