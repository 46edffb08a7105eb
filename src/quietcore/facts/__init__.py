"""Facts about a node, read through a Root: pure parsers over file contents."""
