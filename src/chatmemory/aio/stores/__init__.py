"""The asyncio stores: each executes the same plans as its sync sibling in :mod:`chatmemory.stores`."""
