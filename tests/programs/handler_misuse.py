"""Misuses of define/disable_malleable_handler: each must raise a clear error."""

import json

from apgaspy import (
    MalleableHandler,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    places,
    run,
)


class Quiet(MalleableHandler):
    def pre_shrink(self, n):
        return places()[-n:]

    def post_shrink(self, n, removed):
        pass

    def pre_grow(self, n):
        pass

    def post_grow(self, n, continued, added):
        pass


def attempt(name, fn):
    try:
        fn()
        print(json.dumps({"case": name, "error": None}))
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({"case": name, "error": type(exc).__name__, "message": str(exc)}))


def main():
    attempt("disable before define", disable_malleable_handler)
    attempt("not a handler", lambda: define_malleable_handler(object()))
    attempt("away from place 0", lambda: at(places()[-1], define_malleable_handler, Quiet()))
    attempt("define", lambda: define_malleable_handler(Quiet()))
    attempt("define twice", lambda: define_malleable_handler(Quiet()))
    attempt("disable", disable_malleable_handler)
    attempt("define after disable", lambda: define_malleable_handler(Quiet()))


if __name__ == "__main__":
    run(main)
