"""Settings of apgaspy and of its extensions, read one way (public).

Every setting is a keyword argument where a function takes one, else an environment variable
(``APGAS_<NAME>`` for the runtime's own table :data:`SETTINGS`), else its documented default;
:func:`setting` reads one and rejects a bad value with a :class:`ConfigurationError` naming
the variable, the value and what is expected.  An extension (GLB, a communicator) keeps its
own table of :class:`Setting` rows and prefix, and reads it through the same helper::

    from apgaspy.config import Setting, setting

    MINE = {"RETRIES": Setting("RETRIES", 3, int, lambda v: None if v > 0 else
                               "must be positive", "attempts before giving up")}
    retries = setting("RETRIES", table=MINE, prefix="MYEXT_")
"""

from ._config import SETTINGS, Setting, parse_bool, setting
from ._env_check import describe, unknown_variables

__all__ = ["Setting", "SETTINGS", "setting", "parse_bool", "unknown_variables", "describe"]
