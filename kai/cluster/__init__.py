"""The live scheduler: informers, cache, binder, evictor, status updater."""
