#!/usr/bin/env bash
# Extract every translatable string of the window into resources/ember_chat/resources/i18n/ember_<lang>.ts (Qt Linguist),
# and compile the translated ones into the .qm files Ember loads for the system language:
#   bash packaging/update_translations.sh de fr     # creates/updates ember_de.ts and ember_fr.ts
# English is the source language and needs no file.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
for lang in "$@"; do
    "$BIN/pyside6-lupdate" $(find app -name '*.py') -ts "resources/ember_chat/resources/i18n/ember_$lang.ts"
done
for ts in resources/ember_chat/resources/i18n/ember_*.ts; do
    [ -e "$ts" ] && "$BIN/pyside6-lrelease" "$ts" -qm "${ts%.ts}.qm"
done
