"""Ember, installed under one namespace: `ember_chat.app` (the Qt desktop app, from app/) and
`ember_chat.engine` (everything else, from engine/), so the generic folder names never collide with
other distributions in site-packages."""
