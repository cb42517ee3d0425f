"""Canister queues: the spec's ``Queue<T>`` and the per-canister set of queues.

Every canister has one ingress queue and, per remote canister, an input queue (messages from
it) and an output queue (messages to it). A queue has a capacity shared by the messages it
holds and the slots it has reserved for responses: sending a request reserves a slot for its
response in the sender's input queue, and accepting a request reserves one in the receiver's
output queue, so a response always fits.

Bounded-wait messages (``deadline != 0``) take no reservation: their requests need room
in the queue they enter only, and their responses enter a queue whether or not it is full.
What bounds them instead is a subnet-wide byte budget (``message_routing.shedding``), which
may remove the largest of them (``remove_where``) or turn a response into a small
``SYS_UNKNOWN`` reject in place (``replace_at``).
"""

from __future__ import annotations

from collections import deque
from typing import Generic, Iterable, Iterator, TypeVar

from mypy_extensions import mypyc_attr

from .errors import StateManagerError
from .key_ordered import KeyOrderedDict
from .messages import CanisterId, Ingress, Request, RequestOrResponse, Response

__all__ = ["Queue", "QueueError", "QueueFullError", "NoReservedSlotError", "CanisterQueues"]

T = TypeVar("T")


# The errors stay ordinary Python classes when this module is compiled (see setup.py).
@mypyc_attr(native_class=False)
class QueueError(StateManagerError):
    """A queue operation that would break a queue invariant."""


@mypyc_attr(native_class=False)
class QueueFullError(QueueError):
    pass


@mypyc_attr(native_class=False)
class NoReservedSlotError(QueueError):
    pass


class Queue(Generic[T]):
    """``Queue<T> = {next_index, elements}``: element ``k`` has index ``begin + k``.

    ``next_index`` is the index the next pushed element gets; it never goes back while the
    queue exists, so indices label queue positions in the state tree stably.
    """

    __slots__ = ("begin", "elements", "reserved_slots")

    def __init__(self, begin: int = 0, elements: Iterable[T] = (), reserved_slots: int = 0) -> None:
        self.begin = begin
        self.elements: deque[T] = deque(elements)
        self.reserved_slots = reserved_slots

    @property
    def next_index(self) -> int:
        return self.begin + len(self.elements)

    def __len__(self) -> int:
        return len(self.elements)

    def available_slots(self, capacity: int) -> int:
        """``capacity - |elements| - reserved_slots``."""
        return capacity - len(self.elements) - self.reserved_slots

    def has_room(self, capacity: int) -> bool:
        return len(self.elements) + self.reserved_slots < capacity

    def push(self, element: T) -> int:
        """Append ``element``; return its index."""
        self.elements.append(element)
        return self.begin + len(self.elements) - 1

    def push_into_reserved_slot(self, element: T) -> int:
        if self.reserved_slots <= 0:
            raise NoReservedSlotError("no reserved slot for a response")
        self.reserved_slots -= 1
        return self.push(element)

    def peek(self) -> T | None:
        return self.elements[0] if self.elements else None

    def pop(self) -> T:
        element = self.elements.popleft()
        self.begin += 1
        return element

    def replace_at(self, position: int, element: T) -> None:
        """Put ``element`` where the ``position``-th element is (its index stays the same)."""
        self.elements[position] = element

    def remove_where(self, positions: list[int]) -> None:
        """Remove the elements at ``positions`` (ascending). Later elements move down: queue
        indices are positions, not message ids, and only shedding removes from the middle."""
        kept: deque[T] = deque()
        drop = 0
        for k, element in enumerate(self.elements):
            if drop < len(positions) and positions[drop] == k:
                drop += 1
            else:
                kept.append(element)
        self.elements = kept

    def is_idle(self) -> bool:
        """No messages and no reservations: the queue can be dropped from the state."""
        return not self.elements and self.reserved_slots == 0

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Queue)
            and self.begin == other.begin
            and self.reserved_slots == other.reserved_slots
            and self.elements == other.elements
        )

    def __repr__(self) -> str:
        return f"Queue(begin={self.begin}, elements={list(self.elements)!r}, reserved_slots={self.reserved_slots})"

    def copy(self) -> "Queue[T]":
        return Queue(self.begin, self.elements, self.reserved_slots)


class CanisterQueues:
    """The queues of one canister, keyed by remote canister id (iterated in id order)."""

    __slots__ = ("ingress_queue", "input_queues", "output_queues", "_input_schedule", "dirty")

    def __init__(self) -> None:
        self.dirty = True  # set by every mutation below; cleared by the state tree
        self.ingress_queue: Queue[Ingress] = Queue()
        self.input_queues = KeyOrderedDict()   # remote canister -> Queue[RequestOrResponse]
        self.output_queues = KeyOrderedDict()  # remote canister -> Queue[RequestOrResponse]
        # Round-robin position over (ingress, input queues): the remote id served last, or
        # None when ingress was served last. Part of the replicated state (it decides order).
        self._input_schedule: int | None = None

    @property
    def input_schedule(self) -> int | None:
        return self._input_schedule

    @input_schedule.setter
    def input_schedule(self, remote: int | None) -> None:
        self._input_schedule = remote
        self.dirty = True

    def push_ingress(self, ingress: Ingress) -> None:
        self.dirty = True
        self.ingress_queue.push(ingress)

    def pop_ingress(self) -> Ingress:
        self.dirty = True
        return self.ingress_queue.pop()

    # -- helpers that keep the reservation bookkeeping in one place --------------------------

    def _input(self, remote: CanisterId) -> Queue:
        self.dirty = True
        queue = self.input_queues.get(remote)
        if queue is None:
            queue = self.input_queues[remote] = Queue()
        return queue

    def _output(self, remote: CanisterId) -> Queue:
        self.dirty = True
        queue = self.output_queues.get(remote)
        if queue is None:
            queue = self.output_queues[remote] = Queue()
        return queue

    def can_push_output_request(self, receiver: CanisterId, capacity: int) -> bool:
        out = self.output_queues.get(receiver)
        inp = self.input_queues.get(receiver)
        return (out is None or out.has_room(capacity)) and (inp is None or inp.has_room(capacity))

    def can_push_bounded_wait_request(self, queue_map: KeyOrderedDict, remote: CanisterId, capacity: int) -> bool:
        """A bounded-wait request needs room in the one queue it enters (no reservation)."""
        queue = queue_map.get(remote)
        return queue is None or queue.has_room(capacity)

    def push_output_request(self, request: Request, capacity: int) -> None:
        """Queue an outgoing request and reserve the input slot for its response (a
        bounded-wait request reserves nothing)."""
        if request.deadline != 0:
            if not self.can_push_bounded_wait_request(self.output_queues, request.receiver, capacity):
                raise QueueFullError(f"output queue to canister {request.receiver} is full")
            self._output(request.receiver).push(request)
            return
        if not self.can_push_output_request(request.receiver, capacity):
            raise QueueFullError(f"queues to canister {request.receiver} are full")
        self._output(request.receiver).push(request)
        self._input(request.receiver).reserved_slots += 1

    def push_output_response(self, response: Response) -> None:
        """Queue an outgoing response into the slot reserved when its request was accepted
        (a bounded-wait response needs no slot)."""
        if response.deadline != 0:
            self._output(response.originator).push(response)
            return
        self._output(response.originator).push_into_reserved_slot(response)

    def can_push_input_request(self, sender: CanisterId, capacity: int) -> bool:
        inp = self.input_queues.get(sender)
        out = self.output_queues.get(sender)
        return (inp is None or inp.has_room(capacity)) and (out is None or out.has_room(capacity))

    def push_input_request(self, request: Request, capacity: int) -> None:
        """Accept an incoming request and reserve the output slot for our response (a
        bounded-wait request reserves nothing)."""
        if request.deadline != 0:
            if not self.can_push_bounded_wait_request(self.input_queues, request.sender, capacity):
                raise QueueFullError(f"input queue from canister {request.sender} is full")
            self._input(request.sender).push(request)
            return
        if not self.can_push_input_request(request.sender, capacity):
            raise QueueFullError(f"queues from canister {request.sender} are full")
        self._input(request.sender).push(request)
        self._output(request.sender).reserved_slots += 1

    def push_input_response(self, response: Response) -> None:
        """Accept an incoming response; it takes the slot reserved by our request.

        Responses are always accepted: a response without a reservation (which an honest
        peer never sends) still enters the queue, so nothing is lost; execution drops it if
        no callback waits for it.
        """
        queue = self._input(response.respondent)
        if queue.reserved_slots > 0 and response.deadline == 0:
            queue.reserved_slots -= 1  # a bounded-wait response never takes a guaranteed call's slot
        queue.push(response)

    def has_enqueued_response(self, respondent: CanisterId, callback_id: int) -> bool:
        """A response for ``callback_id`` waits in the input queue from ``respondent``."""
        queue = self.input_queues.get(respondent)
        if queue is None:
            return False
        for message in queue.elements:
            if type(message) is Response and message.originator_reply_callback == callback_id:
                return True
        return False

    def drop_idle_queue(self, queue_map: KeyOrderedDict, remote: CanisterId) -> None:
        """Forget the queue to or from ``remote`` if it holds nothing and reserves nothing."""
        queue = queue_map.get(remote)
        if queue is not None and queue.is_idle():
            self.dirty = True
            del queue_map[remote]

    def release_input_reservation(self, remote: CanisterId) -> None:
        """Give back the slot reserved for a response that will never come."""
        self.dirty = True
        queue = self.input_queues.get(remote)
        if queue is not None and queue.reserved_slots > 0:
            queue.reserved_slots -= 1
            if queue.is_idle():
                del self.input_queues[remote]

    def pop_output(self, remote: CanisterId) -> RequestOrResponse:
        self.dirty = True
        queue = self.output_queues[remote]
        message = queue.pop()
        if queue.is_idle():
            del self.output_queues[remote]
        return message

    def pop_input(self, remote: CanisterId) -> RequestOrResponse:
        self.dirty = True
        queue = self.input_queues[remote]
        message = queue.pop()
        if queue.is_idle():
            del self.input_queues[remote]
        return message

    def has_input(self) -> bool:
        if self.ingress_queue.elements:
            return True
        for queue in self.input_queues.unordered_values():
            if queue.elements:
                return True
        return False

    def has_output(self) -> bool:
        for queue in self.output_queues.unordered_values():
            if queue.elements:
                return True
        return False

    def message_count(self) -> int:
        return (
            len(self.ingress_queue)
            + sum(len(q) for q in self.input_queues.unordered_values())
            + sum(len(q) for q in self.output_queues.unordered_values())
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, CanisterQueues)
            and self.ingress_queue == other.ingress_queue
            and dict(self.input_queues) == dict(other.input_queues)
            and dict(self.output_queues) == dict(other.output_queues)
            and self.input_schedule == other.input_schedule
        )

    def __repr__(self) -> str:
        return (
            f"CanisterQueues(ingress={self.ingress_queue!r}, input={dict(self.input_queues)!r}, "
            f"output={dict(self.output_queues)!r}, input_schedule={self.input_schedule!r})"
        )
