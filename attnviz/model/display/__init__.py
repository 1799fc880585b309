"""What the views draw, computed without Qt: cell and pixel arithmetic, pooling for display, RGBA
overlays, the all-heads grid layout, matrices and rows taken out of a compute response, long-sequence
overviews and the mask designer's snapshot. Kept below the UI so plain tests check them without a
QApplication.
"""
