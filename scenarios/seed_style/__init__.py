"""The pattern this project exists for, in miniature: an autotuner written as the public
MPPI library writes it (`library`: a mutable config holder, an un-jitted controller whose
inner ``lax.scan`` is rebuilt on every step, a Python loop over the candidates with
``np.array`` and ``float`` per candidate), and its rewrites the JAX way (`rewrites`:
pure parameters, a jitted loop, ``vmap``, one ``lax.scan``), which compute the same
numbers. The manual's "Profiling a library" page profiles it; the tests hold its counts.
"""
