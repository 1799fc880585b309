"""The numbers behind the diagnostics views, pure and Qt-free: plain arrays in, arrays or frozen
dataclasses a panel can draw out. Import from the modules themselves: ``normalisation``,
``jacobian``, ``positional_study``, ``permutation``, ``breakdown``, ``qk_embedding``,
``flash_check``, ``alignment``, ``variants``.
"""
