#!/usr/bin/env bash
# Install a built bundle for the current user, with its menu entry, icon and AppStream metadata:
#   bash packaging/install-linux.sh [dist/ember-chat]      # install (or update)
#   bash packaging/install-linux.sh --uninstall            # remove it (chats and models stay)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
APP_ID="io.emberchat.Ember"
DATA="${XDG_DATA_HOME:-$HOME/.local/share}"
APPDIR="$HOME/.local/opt/ember-chat"
BIN="$HOME/.local/bin"
SIZES="16 24 32 48 64 128 256 512"

refresh_menus() {
    command -v update-desktop-database >/dev/null && update-desktop-database -q "$DATA/applications" || true
    command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
}

if [ "${1:-}" = "--uninstall" ]; then
    rm -rf "$APPDIR"
    rm -f "$BIN/ember-chat" "$DATA/applications/$APP_ID.desktop" "$DATA/metainfo/$APP_ID.metainfo.xml" \
        "$DATA/icons/hicolor/scalable/apps/$APP_ID.svg"
    for s in $SIZES; do rm -f "$DATA/icons/hicolor/${s}x${s}/apps/$APP_ID.png"; done
    refresh_menus
    echo "Ember removed (your chats and models are still in ~/.local/share/Ember)."
    exit 0
fi

DIST="$(cd "${1:-$ROOT/dist/ember-chat}" 2>/dev/null && pwd || true)"
if [ -z "$DIST" ] || [ ! -x "$DIST/ember-chat" ]; then
    echo "install-linux: no bundle at ${1:-dist/ember-chat}; build it first with: bash packaging/build.sh" >&2
    exit 2
fi
rm -rf "$APPDIR"
mkdir -p "$APPDIR" "$BIN" "$DATA/applications" "$DATA/metainfo"
cp -a "$DIST/." "$APPDIR/"
ln -sf "$APPDIR/ember-chat" "$BIN/ember-chat"
# the menu entry runs the installed executable by its full path (~/.local/bin may not be on PATH)
sed -e "s|^Exec=ember-chat|Exec=$APPDIR/ember-chat|" -e "s|^TryExec=ember-chat|TryExec=$APPDIR/ember-chat|" \
    "$ROOT/resources/ember_chat/resources/linux/$APP_ID.desktop" > "$DATA/applications/$APP_ID.desktop"
cp "$ROOT/resources/ember_chat/resources/linux/$APP_ID.metainfo.xml" "$DATA/metainfo/"
for s in $SIZES; do
    install -D -m 644 "$ROOT/resources/ember_chat/resources/icons/ember-$s.png" "$DATA/icons/hicolor/${s}x${s}/apps/$APP_ID.png"
done
install -D -m 644 "$ROOT/resources/ember_chat/resources/icons/ember.svg" "$DATA/icons/hicolor/scalable/apps/$APP_ID.svg"
refresh_menus
echo "Ember installed: $APPDIR (menu entry: Ember; command: $BIN/ember-chat)"
