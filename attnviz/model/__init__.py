"""The Qt-free domain: session state, commands that edit it, positional encodings, heads, score
rules, mask design and compute requests. Imports engine and sources only.
"""
