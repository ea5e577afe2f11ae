#!/usr/bin/env bash
# The pretraining text of specs/examples/graphs/mlm-en-wsj.yaml: Multi30k's English captions and the words of
# the treebank sample's training (and validation) sentences, one sentence a line, written to data/mlm-en-wsj/.
#   train.txt: Multi30k train.en + pos-sample train.words      valid.txt: val.en + pos-sample valid.words
#   test.txt:  Multi30k test2016.en only (the tagger's test sentences stay unseen, even without their tags)
# Fetches both data sets first (offline: TBUILD_DATA_MIRROR names a folder holding them).
set -euo pipefail
cd "$(dirname "$0")/.."
tbuild=.venv/bin/tbuild
$tbuild data fetch specs/examples/graphs/mlm-en.yaml
$tbuild data fetch specs/examples/graphs/pos-tagger.yaml
out=data/mlm-en-wsj
mkdir -p "$out"
write() {  # write FILE PARTS...: their lines, concatenated, written whole or not at all
  local file=$1; shift
  cat "$@" > "$file.partial" && mv "$file.partial" "$file"
}
write "$out/train.txt" <(gzip -dc data/multi30k/train.en.gz) data/pos-sample/train.words
write "$out/valid.txt" <(gzip -dc data/multi30k/val.en.gz) data/pos-sample/valid.words
write "$out/test.txt" <(gzip -dc data/multi30k/test2016.en.gz)
wc -l "$out"/*.txt
