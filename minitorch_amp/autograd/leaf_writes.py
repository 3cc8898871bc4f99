"""What a backward pass writes into leaves' ``.grad``, kept so that the pass is all or nothing.

A pass writes each leaf's gradient as it arrives, most often straight into the buffer that
``clear_grad()`` left stale (no extra memory, the address kept). Before a leaf's first write
the engine notes the leaf's ``.grad`` as it was: the Tensor (or None) and its stale flag.
An addition into a gradient held from before the pass (accumulation across ``backward()``
calls with no ``clear_grad()`` between) cannot be taken back exactly, so it is staged and
done at :meth:`LeafWrites.commit`, once the whole pass, hooks included, has succeeded.

If the pass fails (a hook raises, a tensor saved for backward was changed, out of memory),
:meth:`LeafWrites.undo` puts every noted ``.grad`` back: a buffer that was stale is stale
again (what the pass wrote into it is dead: a reader sees zeros, the next backward writes
it), a gradient the pass created is dropped, a recorded one (``create_graph``) is restored,
and staged additions are never made. Each ``.grad`` is then bit for bit what it was.
"""

from __future__ import annotations


class LeafWrites:
    """The ``.grad`` writes of one backward pass: undo notes and staged additions."""

    __slots__ = ("before", "staged")

    def __init__(self):
        self.before: dict = {}  # id(leaf) -> (leaf, its _grad_value, its _grad_stale)
        self.staged: dict = {}  # id(leaf) -> (leaf, [gradients to add at commit])

    def note(self, leaf) -> None:
        """Remember ``leaf``'s ``.grad`` before the pass first writes it."""
        if id(leaf) not in self.before:
            self.before[id(leaf)] = (leaf, leaf._grad_value, leaf._grad_stale)

    def holds_old(self, leaf) -> bool:
        """True when the pass would add into a gradient held from before it: a plain array
        (not recorded), not stale, that this pass has not written."""
        store = leaf._grad_value
        return (
            store is not None
            and not leaf._grad_stale
            and store._node is None
            and id(leaf) not in self.before
        )

    def stage(self, leaf, grad) -> None:
        """Keep ``grad`` to add into ``leaf``'s held gradient at :meth:`commit`.

        NOTE: kept, not copied (a copy per parameter per accumulation step would cost a
        launch and its memory): within a pass no gradient that flows is written in place;
        the only in-place writes go into leaves' own buffers, which never flow.
        """
        entry = self.staged.get(id(leaf))
        if entry is None:
            self.staged[id(leaf)] = entry = (leaf, [])
        entry[1].append(grad)

    def commit(self) -> None:
        """The pass succeeded: make the staged additions (in arrival order, in place)."""
        for leaf, grads in self.staged.values():
            store = leaf._grad._data
            for grad in grads:
                store += grad
        self.staged.clear()

    def undo(self) -> None:
        """The pass failed: every noted ``.grad`` back as it was, nothing staged added."""
        for leaf, value, stale in self.before.values():
            leaf._grad_value = value
            leaf._grad_stale = stale
        self.before.clear()
        self.staged.clear()
