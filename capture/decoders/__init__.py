"""Pure decoders: a znode's path, previous and new value -> the typed events of the change."""
