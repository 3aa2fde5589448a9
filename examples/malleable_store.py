"""A malleable key-value store: its handler moves data off released places.

Each place keeps a part of the keys (a PlaceLocalObject).  Before a shrink the handler ships
the leaving places' keys to the places that stay; after a grow it creates the store on the new
places and hands them a share of the keys.  The totals stay exact whatever the orders.

The handler runs on its own thread, so it holds ``PAUSE`` from pre_* to post_* (once pre_*
has returned, the runtime calls the matching post_* exactly once; an order refused before
calls neither) and the main loop takes it for each round: main never sees a place without
its store, nor sends to a place being released.

    APGAS_PLACES=2 APGAS_COMMUNICATOR=schedule \\
    APGAS_SCHEDULE="after 1 s grow 2 on localhost localhost; after 3 s shrink 1" \\
        python examples/malleable_store.py
"""

import threading
import time
import zlib

from apgaspy import (
    MalleableHandler,
    PlaceLocalObject,
    async_at,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    finish,
    here,
    places,
    run,
)


class Store(PlaceLocalObject):
    def __init__(self):
        self.data = {}

    def take(self, keep):  # remove and return the items this place does not keep
        gone = {k: v for k, v in self.data.items() if not keep(k)}
        for k in gone:
            del self.data[k]
        return gone


PAUSE = threading.Lock()


def owner(key, ids):
    # not hash(): string hashes differ from process to process
    return ids[zlib.crc32(key.encode()) % len(ids)]


class Rebalancer(MalleableHandler):
    def __init__(self, store):
        self.store = store

    def pre_shrink(self, n):
        PAUSE.acquire()
        leaving = places()[-n:]
        stay = [p.id for p in places() if p not in leaving]
        self._move(stay)
        return leaving

    def post_shrink(self, n, removed):
        print(f"released {removed}, {n} places left, {total(self.store)} increments kept")
        PAUSE.release()

    def pre_grow(self, n):
        PAUSE.acquire()

    def post_grow(self, n, continued, added):
        self.store.add_places(added, Store)
        self._move([p.id for p in places()])
        print(f"added {added}, now {n} places, {total(self.store)} increments kept")
        PAUSE.release()

    def _move(self, ids):
        store = self.store
        for p in places():  # each place gives away the keys it no longer owns
            items = at(p, lambda s=store: s.take(lambda key: owner(key, ids) == here().id))
            with finish():
                for k, v in items.items():
                    async_at(owner(k, ids), bump, store, k, v)


def total(store):
    return sum(at(p, lambda s=store: sum(s.data.values())) for p in places())


def bump(store, key, amount=1):
    store.data[key] = store.data.get(key, 0) + amount


def main(seconds=5.0):
    store = Store.make(places(), Store)
    define_malleable_handler(Rebalancer(store))
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        with PAUSE, finish():
            ids = [p.id for p in places()]
            for i in range(50):
                async_at(owner(f"key{i}", ids), bump, store, f"key{i}")
        done += 50
    disable_malleable_handler()  # no order can run between the check below and the end
    print(f"{done} increments made, {total(store)} found on {len(places())} places")


if __name__ == "__main__":
    run(main)
