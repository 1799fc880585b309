"""Bundled data files of attnviz (tokenizer vocabulary, demo images, icons), read via importlib.resources."""
