"""How the transcript draws a message: Markdown, code highlighting, maths as images, line breaks."""
