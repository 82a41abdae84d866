"""The Markdown mirror: every live memory as a file a person can read, grep, edit and version.

``files`` writes the store out and knows who owns each file, ``readback`` takes hand edits and
hand-made files back in as versions, ``frontmatter`` renders and parses the files' headers, and
``safe_io`` reads and writes below the mirror folder without following a link or blocking.
"""
