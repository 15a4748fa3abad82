"""The one exception type for bad user input.

Anything a user can fix (a config key, a data row, a path) raises `UserError`; the command line
turns it into one readable line on stderr and exit code 2, never a traceback.
"""


class UserError(Exception):
    """Bad input the user can fix. The message must stand alone on one line."""
