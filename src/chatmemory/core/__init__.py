"""The core: messages, window memories, token estimators, the store contract, errors. No I/O."""
