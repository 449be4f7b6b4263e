"""How the project reads and writes files and takes bounded network answers.

Leaves every layer may use: files written atomically (:mod:`sweep.io.atomic`),
the sweep dir's lock (:mod:`sweep.io.dirlock`), HTTP answers read within a
size and time bound (:mod:`sweep.io.bounded_http`), and files read back
defensively (:mod:`sweep.io.readback`).
"""
