"""The instruction meter of one loaded canister module, and the faults it raises.

**The unit.** One *instruction* is one evaluated node of the module's syntax tree (a
statement, a name, a constant, an operator, a call, ...), charged statically per block when
the block starts (``metering``), plus:

* ``FUNCTION_CALL`` per call of a canister function (frame set-up), ``LOOP_ITERATION`` per
  iteration of a loop or comprehension on top of the nodes it evaluates;
* work inside builtins and SDK calls that grows with their arguments, charged by size
  *before* it runs (``safe_builtins``): one instruction per item moved or compared and one
  per ``BYTES_PER_INSTRUCTION`` bytes of text or bytes built; sorting ``n`` items costs
  ``n * ceil(log2 n)``. A str slice or a ``+`` of two strs in a function body whose result
  is shorter than ``syntax.SHORT_TEXT`` (256) characters is not charged by size: its work is
  bounded by a constant, which its node covers.

An innermost ``for`` loop without ``break``, ``return`` or ``yield`` over an immutable
sized iterable pays for all its iterations when it starts, if they fit in what is left
(``metering``). So the count is a function of the code and its inputs only: the same on
every replica, replay and hash seed; no clock is read. Allocations whose size an argument sets
(``bytearray(n)``, ``x * n``, ``a + b``, ``x << n``, ...) also count their bytes against the
message's memory limit before anything is allocated.

**Faults.** Canister code cannot catch them: they derive from ``BaseException`` and the
subset refuses ``except:`` and ``except BaseException``. The meter is *sticky*: once the
limit is exceeded, every further charge raises again, so a ``finally`` block or a context
manager's ``__exit__`` that swallows the fault cannot run on; the runtime also checks the
meter when a method returns.
"""

from __future__ import annotations

__all__ = [
    "Meter", "SandboxFault", "InstructionLimitExceeded", "MemoryLimitExceeded", "DepthLimitExceeded",
    "FUNCTION_CALL", "LOOP_ITERATION", "BYTES_PER_INSTRUCTION", "MAX_CALL_DEPTH", "UNLIMITED",
]

#: Instructions per call of a canister function, per loop or comprehension iteration.
FUNCTION_CALL = 5
LOOP_ITERATION = 1
#: Bytes of text or bytes one instruction builds, copies or scans.
BYTES_PER_INSTRUCTION = 16
#: Canister functions may nest this deep (counted by the instrumented code, not by CPython,
#: whose own limit depends on how deep the host's stack already is).
MAX_CALL_DEPTH = 200
UNLIMITED = 2**62


class SandboxFault(BaseException):
    """A message exceeded a limit of the sandbox; ``description`` is its trap text."""

    description = "the sandbox stopped the message"


class InstructionLimitExceeded(SandboxFault):
    """The instruction limit of the message was exceeded."""

    description = "exceeded the instruction limit for single message execution"


class MemoryLimitExceeded(SandboxFault):
    """An allocation would take the message over its memory limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.description = f"exceeded the memory limit of {limit} bytes for single message execution"


class DepthLimitExceeded(SandboxFault):
    """Canister functions nested deeper than ``MAX_CALL_DEPTH``."""

    description = f"call depth exceeded {MAX_CALL_DEPTH} nested calls"


class Meter:
    """Counts one message's instructions (``left`` goes down), call depth and allocated bytes.

    The instrumented code reads and writes ``left`` and ``depth`` directly (fast paths);
    everything else goes through the methods. One ``Meter`` serves one loaded module, and an
    environment runs one message at a time, so ``begin`` refuses to start a second run."""

    __slots__ = ("left", "depth", "max_depth", "limit", "memory_left", "memory_limit", "running", "fault")

    def __init__(self) -> None:
        self.left = UNLIMITED
        self.limit = UNLIMITED
        self.depth = 0
        self.max_depth = MAX_CALL_DEPTH
        self.memory_left = UNLIMITED
        self.memory_limit = UNLIMITED
        self.running = False
        self.fault: SandboxFault | None = None

    # -- one run -----------------------------------------------------------------------------

    def begin(self, instruction_limit: int, memory_limit: int) -> None:
        if self.running:
            raise RuntimeError("a canister module is already running a message in this environment")
        self.running = True
        self.left = self.limit = instruction_limit
        self.memory_left = self.memory_limit = memory_limit
        self.depth = 0
        self.fault = None

    def end(self) -> int:
        """Stop the run; the instructions it used (the limit, if it was exceeded)."""
        self.running = False
        used = self.limit if self.left < 0 else self.limit - self.left
        self.left = self.limit = UNLIMITED
        self.memory_left = self.memory_limit = UNLIMITED
        self.depth = 0
        return used

    def exhausted(self) -> SandboxFault | None:
        """The fault this run hit, if any (also when canister code swallowed it)."""
        if self.fault is not None:
            return self.fault
        if self.left < 0:
            return InstructionLimitExceeded()
        return None

    # -- charging ------------------------------------------------------------------------------

    def out(self) -> None:
        """Called by instrumented code when ``left < 0`` or ``depth`` is too deep."""
        if self.left < 0:
            self.left = -1  # sticky: stays exhausted whatever is charged later
            self.fault = self.fault or InstructionLimitExceeded()
            raise InstructionLimitExceeded()
        if self.depth > self.max_depth:
            self.fault = self.fault or DepthLimitExceeded()
            raise DepthLimitExceeded()

    def charge(self, instructions: int) -> None:
        left = self.left - instructions
        self.left = left
        if left < 0:
            self.out()

    def step(self, instructions: int) -> bool:
        """Charge for one comprehension item; ``True`` so it can stand in an ``if`` clause."""
        left = self.left - instructions
        self.left = left
        if left < 0:
            self.out()
        return True

    def allocate(self, nbytes: int, instructions: int) -> None:
        """Charge an allocation of ``nbytes`` (and the instructions to fill it) before it happens."""
        memory = self.memory_left - nbytes
        self.memory_left = memory
        if memory < 0:  # sticky too: memory_left stays negative
            self.left = -1
            self.fault = MemoryLimitExceeded(self.memory_limit)
            raise self.fault
        left = self.left - instructions
        self.left = left
        if left < 0:
            self.out()

    # -- call depth for lambdas and generators (functions inline it) ---------------------------

    def enter(self, instructions: int) -> bool:
        self.depth += 1
        left = self.left - instructions
        self.left = left
        if left < 0 or self.depth > self.max_depth:
            self.out()
        return True

    def leave(self, value: object) -> object:
        self.depth -= 1
        return value

    def suspended(self, value: object) -> object:
        """A generator yields ``value``: its frame leaves the stack."""
        self.depth -= 1
        return value

    def resumed(self, value: object) -> object:
        """A generator is resumed with ``value``: its frame is back on the stack."""
        self.depth += 1
        if self.depth > self.max_depth or self.left < 0:
            self.out()
        return value
