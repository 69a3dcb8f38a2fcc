"""The contract cases, one module per concern; :class:`~chatmemory.testing.ChatMemoryStoreContract` combines them."""
