"""The one error type of the persistence layer.

Every failure to read a session file (missing, unreadable, not a zip, damaged, hostile, from a newer
attnviz, content the model rejects) and every failure to write one (disk full, permission, content
that cannot be stored) raises :class:`SessionError`. Its message names the file, what is wrong,
which member, and what was expected, so the application can show it to a person as it is.
"""

from __future__ import annotations


class SessionError(Exception):
    """A session file could not be read or written; the message says why and what to do."""
