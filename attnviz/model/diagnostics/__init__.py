"""The numbers behind the diagnostics views, pure and Qt-free: every function takes plain arrays and
returns arrays or frozen dataclasses a panel can draw. Import from the modules themselves:

- ``normalisation``: Scaled / No sqrt(d_k) / Uniform weights with row entropy and max weight;
- ``jacobian``: the softmax-Jacobian study and per-row Jacobian norms of a head;
- ``positional_study``: sinusoidal and RoPE properties (M_k, t - s dependence, wavelengths);
- ``permutation``: equivariance and key-value invariance checks;
- ``breakdown``: one (query, key) cell step by step;
- ``qk_embedding``: joint PCA of a head's queries and keys;
- ``flash_check``: fast kernels against the reference (error, time, memory);
- ``alignment``: the cross-attention alignment table;
- ``variants``: the formula text of each score rule.
"""
