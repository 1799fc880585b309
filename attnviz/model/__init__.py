"""The Qt-free domain: session state, commands that edit it, positional encodings, heads, score
rules, mask design and compute requests, and (:mod:`attnviz.model.display`) what the views draw of
them. Imports engine and sources only.
"""
