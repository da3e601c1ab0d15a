"""The window's tool settings (Settings ▸ Tools) and the chat's tool picker."""
