"""The ``apgaspy`` logger: one handler on the process's real stderr, tagged with the place."""

from __future__ import annotations

import logging
import sys

from ._config import setting

__all__ = ["configure_logging"]


def configure_logging(place: int) -> logging.Logger:
    """Set up the ``apgaspy`` logger for this place (level from ``APGAS_LOG_LEVEL``).

    A handler is added only if the application has not configured one on the logger.
    Records go to ``sys.__stderr__`` so that they are never forwarded as program output.
    """
    logger = logging.getLogger("apgaspy")
    logger.setLevel(setting("LOG_LEVEL"))
    mine = [h for h in logger.handlers if getattr(h, "_apgaspy", False)]
    for h in mine:
        logger.removeHandler(h)
    if not logger.handlers:
        handler = logging.StreamHandler(sys.__stderr__)
        handler.setFormatter(
            logging.Formatter(f"apgaspy place({place}) %(levelname)s: %(message)s")
        )
        setattr(handler, "_apgaspy", True)  # noqa: B010 - marks our own handler
        logger.addHandler(handler)
        logger.propagate = False
    return logger
