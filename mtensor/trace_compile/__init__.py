"""Tracing mode: ``record`` (the recording executor), ``graph`` (the IR), ``compile``
(``mt.compile``: trace once per input signature, then replay)."""
