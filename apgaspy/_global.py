"""Global references and place-local objects (APGAS ``GlobalRef``, ``PlaceLocalObject``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from ._exceptions import BadPlaceError
from ._place import Place
from ._runtime import runtime

__all__ = ["GlobalRef", "PlaceLocalObject"]

T = TypeVar("T")
P = TypeVar("P", bound="PlaceLocalObject")


class GlobalRef(Generic[T]):
    """A reference to an object at its home place that can be passed to any place.

    ``GlobalRef(obj)`` registers ``obj`` at the calling place (its home).  The reference
    pickles as (home, id); ``get()`` returns the object, only at home::

        ref = GlobalRef(results)
        async_at(p, lambda: at(ref.home, lambda: ref.get().append(1)))

    Args:
        obj: any object; it stays alive until :meth:`free` is called.

    Raises:
        ApgasError: the runtime is not running.
    """

    __slots__ = ("_home", "_id")

    def __init__(self, obj: T) -> None:
        rt = runtime()
        self._home = rt.here
        self._id = rt.register_object(obj)

    @property
    def home(self) -> Place:
        """The place where the object lives."""
        return Place(self._home)

    def get(self) -> T:
        """The referenced object.

        Raises:
            BadPlaceError: called away from the home place, or after :meth:`free`.
        """
        rt = runtime()
        if rt.here != self._home:
            raise BadPlaceError(
                f"GlobalRef.get() at place({rt.here}): the object lives at place({self._home});"
                f" use at(ref.home, ...) to reach it", rt.here)
        try:
            return rt.objects[self._id]  # type: ignore[no-any-return]
        except KeyError:
            raise BadPlaceError(f"the GlobalRef {self!r} was freed", rt.here) from None

    def free(self) -> None:
        """Forget the object at its home, so that it can be garbage-collected there.

        May be called at any place, any number of times (freeing twice is harmless):

        * at home, the object is forgotten at once; a later :meth:`get` raises
          :class:`BadPlaceError`;
        * away from home, a small uncounted message carries the free to the home place (as
          ``uncounted_async_at(ref.home, ...)``: no finish waits for it), and ``free``
          returns at once; the object is forgotten when the home place handles it.  Messages
          from one place to another arrive in order, so call it once the tasks that use the
          object have been sent (best: after the ``finish`` that waited for them);
        * if the home place is gone (died or released), the object is gone with it: nothing
          is sent and nothing is raised.

        Raises:
            ApgasError: the runtime is not running.
        """
        rt = runtime()
        if rt.here == self._home:
            rt.objects.pop(self._id, None)
            return
        if self._home not in rt.membership.table:
            return  # the home place is gone (dead or released), and its objects with it
        try:
            rt.spawn_uncounted(self._home, _free_here, (self._id,), {})
        except BadPlaceError:  # DeadPlaceError too: the home went away just now
            pass

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_ref, (self._home, self._id))

    def __repr__(self) -> str:
        return f"GlobalRef(place({self._home}), #{self._id})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalRef) and (other._home, other._id) == (self._home, self._id)

    def __hash__(self) -> int:
        return hash((self._home, self._id))


def _free_here(oid: int) -> None:
    """At a reference's home: forget object ``oid`` (the remote half of ``GlobalRef.free``)."""
    runtime().objects.pop(oid, None)


def _rebuild_ref(home: int, oid: int) -> GlobalRef[Any]:
    ref = GlobalRef.__new__(GlobalRef)
    ref._home = home
    ref._id = oid
    return ref


_plo_ids = itertools.count(1)


class PlaceLocalObject:
    """Base class of objects that have one instance at each place of a group.

    Create them with :meth:`make`; afterwards the object pickles as a reference and resolves,
    wherever it arrives, to that place's own instance (APGAS for Java's ``PlaceLocalObject``)::

        class Counter(PlaceLocalObject):
            def __init__(self): self.n = 0

        c = Counter.make(places(), Counter)
        with finish():
            for p in places():
                async_at(p, lambda: setattr(c, "n", c.n + 1))   # each place's own counter

    Subclasses must call nothing special in ``__init__``.
    """

    _plo_id: Any = None

    @classmethod
    def make(cls: type[P], group: Iterable[Place], init: Callable[[], P]) -> P:
        """Create one instance at every place of ``group`` by calling ``init()`` there.

        Args:
            group: the places; must include the calling place.
            init: a picklable callable returning the place's instance (of this class).

        Returns:
            The instance of the calling place.

        Raises:
            ValueError: the calling place is not in ``group``.
            TypeError: ``init`` returned something that is not a PlaceLocalObject.
            MultipleException: ``init`` raised at some place.
        """
        from ._api import async_at, finish

        rt = runtime()
        members = [p.id if isinstance(p, Place) else int(p) for p in group]
        if rt.here not in members:
            raise ValueError(f"place({rt.here}) must be in the group of a PlaceLocalObject")
        gid = (rt.here, next(_plo_ids))
        with finish():
            for p in members:
                async_at(p, _plo_create, gid, init)
        return rt.plos[gid]  # type: ignore[no-any-return]

    def add_places(self, group: Iterable[Place], init: Callable[[], Any]) -> None:
        """Create this object's instance at further places (e.g. after a grow).

        Raises:
            TypeError: the object was not made with :meth:`make`.
            MultipleException: ``init`` raised at some place.
        """
        from ._api import async_at, finish

        if self._plo_id is None:
            raise TypeError("add_places() is for objects created with make()")
        with finish():
            for p in group:
                async_at(p, _plo_create, self._plo_id, init)

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self._plo_id is None:
            return super().__reduce_ex__(protocol)
        return (_plo_resolve, (self._plo_id,))


def _plo_create(gid: Any, init: Callable[[], Any]) -> None:
    obj = init()
    if not isinstance(obj, PlaceLocalObject):
        raise TypeError(f"the init of a PlaceLocalObject returned a {type(obj).__name__}")
    obj._plo_id = gid
    runtime().plos[gid] = obj


def _plo_resolve(gid: Any) -> Any:
    rt = runtime()
    try:
        return rt.plos[gid]
    except KeyError:
        raise BadPlaceError(
            f"place({rt.here}) has no instance of place-local object {gid}", rt.here
        ) from None
