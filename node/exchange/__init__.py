"""A node's memory in plain files, out and in (docs/export.md): ``export`` writes what one token
can read as JSON lines or a folder of Markdown notes; ``importing`` writes records of those
files and of other memory stores through the ordinary write path, as the token's principal.
"""
